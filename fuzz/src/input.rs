//! The inputs of a target, as proptest strategies: a seed mutated ([`Op`]s), text in
//! the target's format built from its dictionary ([`Framing`]), raw bytes. Each
//! shrinks: a failing input becomes the fewest, simplest mutations of the shortest
//! seed that still fail.

use std::sync::Arc;

use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::string::{RegexGeneratorStrategy, string_regex};
use serde_json::{Map, Number, Value};

use crate::targets::{Framing, SEED_CHUNK, Target};

/// The largest input a strategy makes in the suite: decoders see lines up to their cap
/// (1 MiB by default) in production, but the bounds checked here scale with the input,
/// and larger inputs only slow the search.
pub const MAX_INPUT: usize = 256 << 10;

/// How large a strategy's inputs grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// Seed files are taken in pieces of about this many bytes.
    pub seed_piece: usize,
    /// No input is longer.
    pub max_input: usize,
}

/// The suite's: pieces of [`SEED_CHUNK`], inputs up to [`MAX_INPUT`] (a mutation may
/// repeat a stretch into a long line or a deep nesting).
pub const SUITE: Sizes = Sizes {
    seed_piece: SEED_CHUNK,
    max_input: MAX_INPUT,
};

/// The bench's: inputs of at most 4 KiB (libFuzzer's default `-max_len`), from seed
/// pieces of about 2 KiB, so that ten million inputs per decoder take minutes, not
/// hours; the promises checked are the same.
pub const BENCH: Sizes = Sizes {
    seed_piece: 2 << 10,
    max_input: 4 << 10,
};

/// Bytes that change a parser's state: JSON and TOML punctuation, line and SSE
/// framing, escapes, the edges of UTF-8 and of the control range.
const INTERESTING: &[u8] = &[
    0, b'\n', b'\r', b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', b'=', b'#', b'\'', b' ',
    b'0', b'-', b'e', 0x1b, 0x7f, 0x80, 0xbf, 0xc0, 0xe2, 0xf0, 0xff,
];

/// Text that makes numbers overflow, lose precision or parse as something else.
const NUMBERS: &[&str] = &[
    "-1",
    "1e400",
    "-0",
    "18446744073709551616",
    "9007199254740993",
    "1.5",
    "NaN",
    "0x10",
    "1_000",
    "-9223372036854775809",
];

/// One mutation of an input.
#[derive(Debug, Clone)]
pub enum Op {
    /// Flip one bit.
    Flip(Index, u8),
    /// Put an interesting byte in place of one.
    Set(Index, Index),
    /// Insert a dictionary word (quoted half the time) or a number.
    Insert(Index, Index, bool),
    /// Remove up to this many bytes.
    Delete(Index, u16),
    /// Repeat a stretch (at most 4 KiB) this many times: deep nesting, long lines.
    Repeat(Index, u16, u8),
    /// End the input here.
    Cut(Index),
    /// Continue with another seed's tail from its position.
    Splice(Index, Index, Index),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<Index>(), 0u8..8).prop_map(|(a, b)| Op::Flip(a, b)),
        3 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Op::Set(a, b)),
        4 => (any::<Index>(), any::<Index>(), any::<bool>()).prop_map(|(a, w, q)| Op::Insert(a, w, q)),
        2 => (any::<Index>(), 1u16..64).prop_map(|(a, n)| Op::Delete(a, n)),
        1 => (any::<Index>(), 1u16..4096, 2u8..64).prop_map(|(a, n, t)| Op::Repeat(a, n, t)),
        1 => any::<Index>().prop_map(Op::Cut),
        1 => (any::<Index>(), any::<Index>(), any::<Index>()).prop_map(|(a, s, f)| Op::Splice(a, s, f)),
    ]
}

/// `seed` with `ops` applied in order, never past `max` bytes.
pub fn apply(seed: &[u8], ops: &[Op], seeds: &[Vec<u8>], dict: &[&str], max: usize) -> Vec<u8> {
    let mut b = seed[..seed.len().min(max)].to_vec();
    for op in ops {
        let at = |i: &Index, len: usize| i.index(len + 1);
        match op {
            Op::Flip(i, bit) if !b.is_empty() => {
                let n = b.len();
                b[i.index(n)] ^= 1 << bit;
            }
            Op::Set(i, v) if !b.is_empty() => {
                let n = b.len();
                b[i.index(n)] = *v.get(INTERESTING);
            }
            Op::Insert(i, w, quoted) => {
                let word = if *quoted || dict.is_empty() {
                    let words = dict.len() + NUMBERS.len();
                    let k = w.index(words);
                    match dict.get(k) {
                        Some(d) => format!("\"{d}\""),
                        None => NUMBERS[k - dict.len()].to_owned(),
                    }
                } else {
                    (*w.get(dict)).to_owned()
                };
                let p = at(i, b.len());
                b.splice(p..p, word.into_bytes());
            }
            Op::Delete(i, n) => {
                let p = at(i, b.len());
                let end = (p + *n as usize).min(b.len());
                b.drain(p..end);
            }
            Op::Repeat(i, n, times) if !b.is_empty() => {
                let p = i.index(b.len());
                let end = (p + *n as usize).min(b.len());
                let stretch = b[p..end].to_vec();
                let room = max.saturating_sub(b.len()) / stretch.len().max(1);
                let copies = (*times as usize).min(room);
                let tail = b.split_off(end);
                for _ in 0..copies {
                    b.extend_from_slice(&stretch);
                }
                b.extend_from_slice(&tail);
            }
            Op::Cut(i) => {
                let p = at(i, b.len());
                b.truncate(p);
            }
            Op::Splice(i, s, from) if !seeds.is_empty() => {
                let other = s.get(seeds);
                let p = at(i, b.len());
                b.truncate(p);
                b.extend_from_slice(&other[from.index(other.len() + 1)..]);
            }
            _ => {}
        }
        b.truncate(max);
    }
    b
}

/// Text of up to `n` characters of any kind but control and unassigned ones. Made once
/// per strategy: a `&str` strategy compiles its regex again for every value.
fn printable(n: usize) -> RegexGeneratorStrategy<String> {
    string_regex(&format!("\\PC{{0,{n}}}")).expect("a valid regex")
}

/// A JSON value whose keys and strings come mostly from `dict`, nested up to 4 deep.
fn json(dict: Arc<Vec<&'static str>>) -> impl Strategy<Value = Value> {
    let words = dict.clone();
    let word = move || select(words.to_vec());
    let leaf = prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        3 => word().prop_map(Value::from),
        1 => printable(24).prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, move |inner| {
        let key = select(dict.to_vec());
        prop_oneof![
            1 => prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            3 => prop::collection::vec((key, inner), 0..8).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect::<Map<_, _>>())
            }),
        ]
    })
}

/// Text in the target's own format, from its dictionary.
fn framed(t: &Target) -> BoxedStrategy<Vec<u8>> {
    let dict = Arc::new(t.dict.to_vec());
    match t.framing {
        Framing::JsonLines => prop::collection::vec(json(dict), 1..8)
            .prop_map(|vs| lines(vs.iter().map(Value::to_string), "", "\n"))
            .boxed(),
        Framing::Sse => prop::collection::vec(json(dict), 1..8)
            .prop_map(|vs| lines(vs.iter().map(Value::to_string), "data: ", "\n\n"))
            .boxed(),
        Framing::Json => json(dict).prop_map(|v| v.to_string().into_bytes()).boxed(),
        Framing::Toml => {
            let words = dict.to_vec();
            let entry = (
                select(words.clone()),
                select(words),
                any::<bool>(),
                printable(12),
            )
                .prop_map(|(k, v, section, s)| {
                    if section {
                        format!("[{k}]\n{v} = \"{s}\"")
                    } else {
                        format!("{k} = [\"{v}\", {s:?}]")
                    }
                });
            prop::collection::vec(entry, 1..12)
                .prop_map(|es| lines(es.into_iter(), "", "\n"))
                .boxed()
        }
        Framing::Terminal => prop::collection::vec(
            prop_oneof![
                select(t.dict.to_vec()).prop_map(|w| w.to_owned()),
                printable(40),
                (0u16..200, 0u16..200).prop_map(|(r, c)| format!("\x1b[{r};{c}H")),
                Just("\r\n".to_owned()),
            ],
            1..32,
        )
        .prop_map(|parts| parts.concat().into_bytes())
        .boxed(),
    }
}

fn lines(items: impl Iterator<Item = String>, prefix: &str, end: &str) -> Vec<u8> {
    let mut out = String::new();
    for item in items {
        out.push_str(prefix);
        out.push_str(&item);
        out.push_str(end);
    }
    out.into_bytes()
}

/// Every input of `t` up to `sizes`: mutated seeds most often, then text built in its
/// format, then raw bytes.
pub fn inputs(t: &Target, sizes: Sizes) -> BoxedStrategy<Vec<u8>> {
    let seeds = Arc::new(t.seeds_in(sizes.seed_piece));
    let dict = t.dict;
    let max = sizes.max_input;
    let mutated = (any::<Index>(), prop::collection::vec(op(), 0..12)).prop_map(move |(s, ops)| {
        let seed = if seeds.is_empty() {
            &[][..]
        } else {
            &s.get(&seeds)[..]
        };
        apply(seed, &ops, &seeds, dict, max)
    });
    let framed = framed(t).prop_map(move |mut b| {
        b.truncate(max);
        b
    });
    prop_oneof![
        6 => mutated,
        3 => framed,
        1 => prop::collection::vec(any::<u8>(), 0..2048.min(max + 1)),
    ]
    .boxed()
}
