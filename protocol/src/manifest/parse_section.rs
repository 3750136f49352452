//! `[parse]` (spec §5.1): pattern sources kept as written, compiled into [`Patterns`]
//! as they must be to match rendered rows (see [`super::patterns::row_fit`]).

use std::ops::Range;

use regex::Regex;
use toml::de::{DeTable, DeValue};

use super::build::section;
use super::patterns::{Patterns, compile_row_field};
use super::reader::{Reader, join};
use super::types::Parse;

const PARSE_SINGLE: [&str; 6] = [
    "tool_call_start",
    "tool_call_end",
    "plan_section",
    "thought_section",
    "ask_yes_no",
    "ask_options",
];

pub(crate) fn read_parse(
    r: &mut Reader,
    root: &DeTable<'_>,
    empty: &DeTable<'_>,
    pats: &mut Patterns,
) -> Parse {
    let (pt, _) = section(r, root, "", "parse", empty);
    let mut known = vec!["idle", "error_lines"];
    known.extend(PARSE_SINGLE);
    r.unknown_keys(pt, "parse", &known);
    let mut parse = Parse::default();
    if let Some(idle) = r.string_or_list(pt, "parse", "idle") {
        parse.idle = idle;
    }
    pats.idle = compile_list(r, pt, "idle", &parse.idle);
    if let Some(lines) = r.strings(pt, "parse", "error_lines") {
        parse.error_lines = lines;
    }
    pats.error_lines = compile_list(r, pt, "error_lines", &parse.error_lines);
    for key in PARSE_SINGLE {
        let Some(src) = r.string(pt, "parse", key) else {
            continue;
        };
        let re = compile_row_field(r, &join("parse", key), Reader::span_of(pt, key), &src);
        let (src_slot, re_slot) = match key {
            "tool_call_start" => (&mut parse.tool_call_start, &mut pats.tool_call_start),
            "tool_call_end" => (&mut parse.tool_call_end, &mut pats.tool_call_end),
            "plan_section" => (&mut parse.plan_section, &mut pats.plan_section),
            "thought_section" => (&mut parse.thought_section, &mut pats.thought_section),
            "ask_yes_no" => (&mut parse.ask_yes_no, &mut pats.ask_yes_no),
            _ => (&mut parse.ask_options, &mut pats.ask_options),
        };
        *src_slot = Some(src);
        *re_slot = re;
    }
    parse
}

/// Compile a list field, locating each element (`parse.idle[1]`).
fn compile_list(r: &mut Reader, t: &DeTable<'_>, key: &str, srcs: &[String]) -> Vec<Regex> {
    let items: Vec<Range<usize>> = match t.get(key).map(|v| (v.span(), v.get_ref())) {
        Some((_, DeValue::Array(a))) => a.iter().map(|i| i.span()).collect(),
        Some((span, _)) => vec![span],
        None => Vec::new(),
    };
    let list = matches!(t.get(key).map(|v| v.get_ref()), Some(DeValue::Array(_)));
    srcs.iter()
        .enumerate()
        .filter_map(|(i, src)| {
            let name = if list {
                format!("parse.{key}[{i}]")
            } else {
                join("parse", key)
            };
            compile_row_field(r, &name, items.get(i).cloned(), src)
        })
        .collect()
}
