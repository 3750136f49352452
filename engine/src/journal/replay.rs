//! Reading a journal back: every complete record in order, and what is not one. The
//! writer appends whole lines, synced in batches; a crash can leave the last line cut
//! (no end of line, or bytes that are no JSON record — a file system may fill the
//! unsynced tail with zeros). That torn last line is reported ([`Tail::torn`]) and
//! left out, and [`cut_torn`] removes it before anything is appended again (an
//! appender that does not scan first calls [`mend_tail`], which reads only the last
//! line). A line that is no record anywhere else is counted ([`Tail::corrupt`]) and
//! skipped.

use std::io::{self, Read, Seek};
use std::path::Path;

/// A last line the writer never finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Torn {
    /// Where it starts: the length of the journal without it.
    pub offset: u64,
    pub bytes: u64,
}

/// What a pass over a journal found besides its records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tail {
    /// Complete records read.
    pub records: u64,
    /// Lines before the last that are no record (skipped).
    pub corrupt: u64,
    pub torn: Option<Torn>,
}

impl std::fmt::Display for Torn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the journal's last record is torn ({} bytes at offset {}, never completed): left out",
            self.bytes, self.offset
        )
    }
}

/// Bytes read at once: a batch is every whole line in them.
const BATCH_BYTES: usize = 4 << 20;

/// Read `path` line by line; `each` takes every line that ends with a line feed (without
/// it) and says whether it is a record (parsed). The last line, if it is none, is torn.
pub(crate) fn scan(path: &Path, mut each: impl FnMut(&[u8]) -> bool) -> io::Result<Tail> {
    scan_batches(path, |lines| lines.iter().map(|l| each(l)).collect())
}

/// [`scan`] a batch of lines at a time (for a reader that parses them in parallel):
/// `batch` takes, in order, the lines of a batch that end with a line feed and are
/// not empty (without it), and says for each whether it is a record. Every batch
/// is whole lines of at most a few MiB (or one longer line).
pub(crate) fn scan_batches(
    path: &Path,
    mut batch: impl FnMut(&[&[u8]]) -> Vec<bool>,
) -> io::Result<Tail> {
    let mut file = std::fs::File::open(path)?;
    let mut tail = Tail::default();
    let mut offset = 0u64;
    // The last line that was no record: torn if nothing follows it.
    let mut bad: Option<Torn> = None;
    let mut buf: Vec<u8> = Vec::with_capacity(BATCH_BYTES);
    let mut eof = false;
    while !eof {
        // Fill to the batch size (more only while no line has ended yet).
        let kept = buf.len();
        let want = (kept.max(BATCH_BYTES / 2) + BATCH_BYTES / 2 - kept) as u64;
        let read = (&mut file).take(want).read_to_end(&mut buf)? as u64;
        eof = read < want;
        // Whole lines; at the end of the file, the unended rest too.
        let whole = match memchr::memrchr(b'\n', &buf) {
            Some(i) => i + 1,
            None if eof => 0,
            None => continue,
        };
        let mut lines: Vec<&[u8]> = Vec::new();
        let mut from = 0;
        for end in memchr::memchr_iter(b'\n', &buf[..whole]) {
            lines.push(&buf[from..=end]);
            from = end + 1;
        }
        if eof && whole < buf.len() {
            lines.push(&buf[whole..]);
        }
        let bodies: Vec<&[u8]> = lines
            .iter()
            .filter_map(|l| l.strip_suffix(b"\n").filter(|b| !b.is_empty()))
            .collect();
        let verdicts = batch(&bodies);
        let mut verdicts = verdicts.into_iter();
        for line in lines {
            let n = line.len() as u64;
            if let Some(b) = bad.take() {
                tail.corrupt += 1;
                tracing::warn!(
                    offset = b.offset,
                    bytes = b.bytes,
                    "journal line is no record: skipped"
                );
            }
            match line.strip_suffix(b"\n") {
                Some([]) => {}
                Some(_) if verdicts.next() == Some(true) => tail.records += 1,
                _ => bad = Some(Torn { offset, bytes: n }),
            }
            offset += n;
        }
        buf.drain(..whole);
        if eof {
            buf.clear();
        }
    }
    tail.torn = bad;
    Ok(tail)
}

/// Cut the torn last line off `path` (so that what is appended next starts a line).
pub fn cut_torn(path: &Path, torn: Torn) -> io::Result<()> {
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    file.set_len(torn.offset)?;
    let mut file = file;
    file.seek(io::SeekFrom::End(0))?;
    file.sync_all()
}

/// What [`mend_tail`] did to a journal's unended last line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mended {
    /// The file was empty or ended with a line feed: nothing to do.
    Whole,
    /// The last line was a whole record without its line feed: the line feed added.
    Ended,
    /// The last line was no record (a write cut by a kill): cut off.
    Cut(Torn),
}

/// Bytes read back at a time while looking for the last line's start.
const MEND_CHUNK: u64 = 64 << 10;

/// Make `file` (a journal opened for reading and appending) end with a whole line
/// before anything is appended, so that a cut write can only ever be a torn *last*
/// line: an unended last line that is a record (`is_record`) gets its line feed; one
/// that is not is cut off. Reads only the last line, backwards from the end.
pub fn mend_tail(
    file: &mut std::fs::File,
    is_record: impl FnOnce(&[u8]) -> bool,
) -> io::Result<Mended> {
    use std::io::Write as _;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(Mended::Whole);
    }
    let mut last = [0u8; 1];
    file.seek(io::SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(Mended::Whole);
    }
    // Find where the unended line starts: after the last line feed, or at 0.
    let mut tail: Vec<u8> = Vec::new();
    let mut end = len;
    let start = loop {
        let from = end.saturating_sub(MEND_CHUNK);
        let mut chunk = vec![0u8; (end - from) as usize];
        file.seek(io::SeekFrom::Start(from))?;
        file.read_exact(&mut chunk)?;
        let feed = memchr::memrchr(b'\n', &chunk);
        chunk.extend_from_slice(&tail);
        tail = chunk;
        if let Some(i) = feed {
            tail.drain(..=i);
            break from + i as u64 + 1;
        }
        if from == 0 {
            break 0;
        }
        end = from;
    };
    if is_record(&tail) {
        file.seek(io::SeekFrom::End(0))?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        return Ok(Mended::Ended);
    }
    let torn = Torn {
        offset: start,
        bytes: len - start,
    };
    file.set_len(start)?;
    file.seek(io::SeekFrom::End(0))?;
    file.sync_all()?;
    Ok(Mended::Cut(torn))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_record(line: &[u8]) -> bool {
        serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok()
    }

    #[test]
    fn a_torn_last_line_is_reported_left_out_and_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        let whole = "{\"a\":1}\n{\"b\":2}\n";
        let last = "{\"c\":\"é\"}\n";
        for cut in 1..last.len() {
            let mut bytes = whole.as_bytes().to_vec();
            bytes.extend_from_slice(&last.as_bytes()[..cut]);
            std::fs::write(&path, &bytes).unwrap();
            let mut seen = 0;
            let tail = scan(&path, |l| {
                seen += 1;
                is_record(l)
            })
            .unwrap();
            assert_eq!(tail.records, 2, "cut at {cut}");
            let torn = tail.torn.expect("torn");
            assert_eq!(torn.offset, whole.len() as u64);
            assert_eq!(torn.bytes, cut as u64);
            cut_torn(&path, torn).unwrap();
            assert_eq!(std::fs::read_to_string(&path).unwrap(), whole);
        }
        // Zeros where the unsynced tail was, ended or not.
        std::fs::write(&path, format!("{whole}\0\0\0\0\n")).unwrap();
        let tail = scan(&path, is_record).unwrap();
        assert_eq!((tail.records, tail.corrupt), (2, 0));
        assert!(tail.torn.is_some());
        std::fs::write(&path, whole).unwrap();
        assert_eq!(scan(&path, is_record).unwrap().torn, None);
    }

    fn mend(bytes: &[u8]) -> (Mended, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        std::fs::write(&path, bytes).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .unwrap();
        let mended = mend_tail(&mut file, is_record).unwrap();
        (mended, std::fs::read(&path).unwrap())
    }

    #[test]
    fn an_unended_last_line_is_ended_when_whole_and_cut_when_torn() {
        let whole = b"{\"a\":1}\n{\"b\":2}\n";
        assert_eq!(mend(b""), (Mended::Whole, b"".to_vec()));
        assert_eq!(mend(whole), (Mended::Whole, whole.to_vec()));
        let mut unended = whole.to_vec();
        unended.extend_from_slice(b"{\"c\":3}");
        let mut ended = unended.clone();
        ended.push(b'\n');
        assert_eq!(mend(&unended), (Mended::Ended, ended));
        for cut in [1, 4, 6] {
            let mut torn = whole.to_vec();
            torn.extend_from_slice(&b"{\"c\":3}"[..cut]);
            let torn_at = Torn {
                offset: whole.len() as u64,
                bytes: cut as u64,
            };
            assert_eq!(mend(&torn), (Mended::Cut(torn_at), whole.to_vec()));
        }
        // A torn first line, and one longer than a read-back chunk.
        assert_eq!(
            mend(b"{\"a\""),
            (
                Mended::Cut(Torn {
                    offset: 0,
                    bytes: 4
                }),
                Vec::new()
            )
        );
        let mut long = whole.to_vec();
        long.extend(std::iter::repeat_n(b'x', (MEND_CHUNK * 2 + 3) as usize));
        let (mended, bytes) = mend(&long);
        assert_eq!(
            mended,
            Mended::Cut(Torn {
                offset: whole.len() as u64,
                bytes: MEND_CHUNK * 2 + 3
            })
        );
        assert_eq!(bytes, whole.to_vec());
    }

    #[test]
    fn a_bad_line_inside_is_counted_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.jsonl");
        std::fs::write(&path, "{\"a\":1}\n{\"b\n{\"c\":3}\n").unwrap();
        let tail = scan(&path, is_record).unwrap();
        assert_eq!((tail.records, tail.corrupt, tail.torn), (2, 1, None));
    }
}
