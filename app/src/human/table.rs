//! Rows of columns that fit a [`Fit`]'s width: the run's summary, the live board,
//! the workspaces, `capfleet runs`. Each column has a rank (0: always on the row's
//! line; the higher, the sooner it gives way). A table is laid out in three tries:
//! as it always was (each value padded to its column's declared width) when that
//! fits or there is no width; else with each column as wide as its widest value;
//! else without its highest-ranked columns, until the rows fit. What gives way is
//! either moved to the row's next lines, indented ([`Overflow::Next`]: the summary,
//! the one copy left), or left out ([`Overflow::Drop`]: the live board, one line
//! per row, redrawn as the terminal changes).

use console::measure_text_width;

use super::fit::Fit;

/// How a value sits in its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// What becomes of the columns that give way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// On the row's next lines, indented.
    Next,
    /// Left out.
    Drop,
}

/// A column: the text before it on a line (`sep`; at the start of a line, its
/// indent), a label before each value, the width its values are padded to, and its
/// rank.
#[derive(Debug, Clone, Copy)]
pub struct Col {
    pub sep: &'static str,
    pub label: &'static str,
    pub pad: usize,
    pub align: Align,
    pub rank: u8,
}

impl Col {
    /// A column of plain values, left-aligned, padded to `pad`.
    pub const fn left(sep: &'static str, pad: usize, rank: u8) -> Col {
        Col {
            sep,
            label: "",
            pad,
            align: Align::Left,
            rank,
        }
    }

    /// Right-aligned.
    pub const fn right(self) -> Col {
        Col {
            align: Align::Right,
            ..self
        }
    }

    /// `label` before each value.
    pub const fn label(self, label: &'static str) -> Col {
        Col { label, ..self }
    }
}

/// A row's value in a column, and the text after it (`unit`, not padded); a blank
/// cell (`None`) takes its column's room with spaces, label included.
pub type Cell = Option<(String, String)>;

/// A value with nothing after it.
pub fn cell(value: impl Into<String>) -> Cell {
    Some((value.into(), String::new()))
}

/// A value and its unit.
pub fn with_unit(value: impl Into<String>, unit: impl Into<String>) -> Cell {
    Some((value.into(), unit.into()))
}

/// The columns and the rows of one table.
#[derive(Debug)]
pub struct Table {
    cols: Vec<Col>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn new(cols: &[Col]) -> Table {
        Table {
            cols: cols.to_vec(),
            rows: Vec::new(),
        }
    }

    /// A row: one cell per column (missing ones are blank).
    pub fn row(&mut self, mut cells: Vec<Cell>) {
        cells.resize(self.cols.len(), None);
        self.rows.push(cells);
    }

    /// Each row's lines, in order: one line per row unless columns moved to the
    /// next lines ([`Overflow::Next`]).
    pub fn lines(&self, fit: &Fit, overflow: Overflow) -> Vec<Vec<String>> {
        let all: Vec<usize> = (0..self.cols.len()).collect();
        let declared: Vec<usize> = self.cols.iter().map(|c| c.pad).collect();
        let whole = self.render(&declared, &all);
        let Some(width) = fit.width() else {
            return whole.into_iter().map(|l| vec![l]).collect();
        };
        let fits = |lines: &[String]| lines.iter().all(|l| measure_text_width(l) <= width);
        if fits(&whole) {
            return whole.into_iter().map(|l| vec![l]).collect();
        }
        let pads = self.compact_pads();
        let mut kept = all;
        let mut first = self.render(&pads, &kept);
        while !fits(&first) {
            let Some(worst) = kept.iter().map(|&c| self.cols[c].rank).max() else {
                break;
            };
            if worst == 0 {
                break;
            }
            kept.retain(|&c| self.cols[c].rank != worst);
            first = self.render(&pads, &kept);
        }
        let indent = self.cols.first().map_or(0, |c| c.sep.len()) + 4;
        first
            .into_iter()
            .zip(&self.rows)
            .map(|(line, cells)| {
                let mut lines = vec![line];
                if overflow == Overflow::Next {
                    lines.extend(fit.pack(&self.moved(cells, &kept), indent));
                }
                lines
            })
            .collect()
    }

    /// Each column as wide as its widest value (a column that declared no width
    /// stays unpadded).
    fn compact_pads(&self) -> Vec<usize> {
        (0..self.cols.len())
            .map(|c| {
                let widest = self
                    .rows
                    .iter()
                    .filter_map(|r| r[c].as_ref())
                    .map(|(v, _)| measure_text_width(v))
                    .max()
                    .unwrap_or(0);
                if self.cols[c].pad == 0 { 0 } else { widest }
            })
            .collect()
    }

    /// Every row as one line of the columns `kept`, each value padded to `pads`.
    fn render(&self, pads: &[usize], kept: &[usize]) -> Vec<String> {
        self.rows
            .iter()
            .map(|cells| {
                let mut line = String::new();
                for &c in kept {
                    let col = &self.cols[c];
                    line.push_str(col.sep);
                    match &cells[c] {
                        Some((value, unit)) => {
                            line.push_str(col.label);
                            line.push_str(&padded(value, pads[c], col.align));
                            line.push_str(unit);
                        }
                        None => {
                            let room = measure_text_width(col.label) + pads[c];
                            line.push_str(&" ".repeat(room));
                        }
                    }
                }
                line.trim_end().to_owned()
            })
            .collect()
    }

    /// The cells of the columns not `kept`, unpadded.
    fn moved(&self, cells: &[Cell], kept: &[usize]) -> Vec<String> {
        (0..self.cols.len())
            .filter(|c| !kept.contains(c))
            .filter_map(|c| {
                let (value, unit) = cells[c].as_ref()?;
                let text = format!("{}{value}{unit}", self.cols[c].label);
                let text = text.trim();
                (!text.is_empty()).then(|| text.to_owned())
            })
            .collect()
    }
}

fn padded(value: &str, pad: usize, align: Align) -> String {
    let room = " ".repeat(pad.saturating_sub(measure_text_width(value)));
    match align {
        Align::Left => format!("{value}{room}"),
        Align::Right => format!("{room}{value}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new(&[
            Col::left("  ", 20, 0),
            Col::left(" ", 12, 1),
            Col::left(" ", 3, 3).right().label("turns "),
            Col::left("  ", 8, 2).right().label("$"),
            Col::left("", 0, 4),
        ]);
        t.row(vec![
            cell("planner"),
            cell("closed"),
            cell("1"),
            cell("0.0040"),
            cell("  won the race"),
        ]);
        t.row(vec![
            cell("total"),
            None,
            cell("12"),
            with_unit("0.0100", " of $1"),
        ]);
        t
    }

    fn flat(rows: Vec<Vec<String>>) -> Vec<String> {
        rows.into_iter().flatten().collect()
    }

    #[test]
    fn without_a_width_rows_are_as_they_always_were() {
        let lines = flat(table().lines(&Fit::default(), Overflow::Next));
        assert_eq!(
            lines,
            [
                format!(
                    "  {:<20} {:<12} turns {:>3}  ${:>8}  won the race",
                    "planner", "closed", 1, "0.0040"
                ),
                format!(
                    "  {:<20} {:<12} turns {:>3}  ${:>8} of $1",
                    "total", "", 12, "0.0100"
                ),
            ]
        );
        let wide = flat(table().lines(&Fit::columns(200), Overflow::Next));
        assert_eq!(wide, lines, "what fits is left as it was");
    }

    #[test]
    fn columns_shrink_to_their_values_then_give_way_by_rank() {
        let compact = flat(table().lines(&Fit::columns(50), Overflow::Next));
        assert_eq!(
            compact,
            [
                "  planner closed turns  1  $0.0040  won the race",
                "  total          turns 12  $0.0100 of $1",
            ]
        );
        // At 32 columns the mark moves first, then turns; state and cost stay.
        let moved = flat(table().lines(&Fit::columns(32), Overflow::Next));
        assert_eq!(
            moved,
            [
                "  planner closed  $0.0040",
                "      turns 1  won the race",
                "  total           $0.0100 of $1",
                "      turns 12",
            ]
        );
        let dropped = flat(table().lines(&Fit::columns(32), Overflow::Drop));
        assert_eq!(
            dropped,
            [
                "  planner closed  $0.0040",
                "  total           $0.0100 of $1"
            ]
        );
    }

    #[test]
    fn rank_zero_never_gives_way() {
        let lines = flat(table().lines(&Fit::columns(5), Overflow::Drop));
        assert_eq!(lines, ["  planner", "  total"]);
    }
}
