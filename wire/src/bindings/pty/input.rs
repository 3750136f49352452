//! Typing into the agent's terminal: prompts (bracketed paste when asked for) and
//! answers, each as one buffer ending with a carriage return (the Enter key).

use serde_json::Value;

/// Bracketed paste start (`ESC [ 200 ~`).
pub(crate) const PASTE_START: &[u8] = b"\x1b[200~";
/// Bracketed paste end (`ESC [ 201 ~`).
pub(crate) const PASTE_END: &[u8] = b"\x1b[201~";
/// Texts longer than this are pasted (spec §6.1).
pub(crate) const PASTE_OVER: usize = 1024;
/// The Enter key.
pub(crate) const ENTER: u8 = b'\r';
/// Ctrl-C.
pub(crate) const CTRL_C: u8 = 0x03;

/// When a prompt is typed as a bracketed paste.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Paste {
    /// The agent knows no bracketed paste: every line is typed.
    Never,
    /// Multi-line or longer than [`PASTE_OVER`] (spec §6.1, `pty.bracketed_paste`).
    Long,
    /// Every prompt (`pty.paste_prompts`): for TUIs that take a fast burst of keys
    /// for a paste and its Enter for a newline (Codex).
    Always,
}

impl Paste {
    pub(crate) fn from_manifest(pty: &crate::manifest::Pty) -> Paste {
        match (pty.bracketed_paste, pty.paste_prompts) {
            (false, _) => Paste::Never,
            (true, false) => Paste::Long,
            (true, true) => Paste::Always,
        }
    }
}

/// The bytes submitting `text`: wrapped in a bracketed paste as `paste` says;
/// otherwise typed line by line (each `\n` an Enter). Always one buffer (the driver
/// writes it in chunks while it keeps draining the agent's output).
pub(crate) fn prompt_bytes(text: &str, paste: Paste) -> Vec<u8> {
    let paste = match paste {
        Paste::Never => false,
        Paste::Long => text.contains('\n') || text.len() > PASTE_OVER,
        Paste::Always => true,
    };
    let mut out = Vec::with_capacity(text.len() + PASTE_START.len() + PASTE_END.len() + 1);
    if paste {
        out.extend_from_slice(PASTE_START);
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(PASTE_END);
    } else {
        out.extend(text.bytes().map(|b| if b == b'\n' { ENTER } else { b }));
    }
    out.push(ENTER);
    out
}

/// The keys answering an ask: `y`/`n` for booleans, the first string of an object
/// form (one question per property), a string or number as typed. `None` (declined)
/// types `n` to a yes/no question and Ctrl-C to anything else.
pub(crate) fn answer_bytes(value: Option<&Value>, yes_no: bool) -> Vec<u8> {
    let text = match value {
        None if yes_no => "n".to_owned(),
        None => return vec![CTRL_C],
        Some(Value::Bool(b)) => if *b { "y" } else { "n" }.to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Object(map)) => map
            .values()
            .find_map(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        Some(other) => other.to_string(),
    };
    let mut out: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_control()).collect();
    out.push(ENTER);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn short_text_is_typed_then_entered() {
        assert_eq!(prompt_bytes("hello", Paste::Long), b"hello\r");
        assert_eq!(
            prompt_bytes("hello", Paste::Always),
            b"\x1b[200~hello\x1b[201~\r"
        );
    }

    #[test]
    fn multi_line_is_one_bracketed_paste() {
        assert_eq!(
            prompt_bytes("a\nb", Paste::Long),
            b"\x1b[200~a\nb\x1b[201~\r"
        );
        let long = "x".repeat(2000);
        assert!(prompt_bytes(&long, Paste::Long).starts_with(PASTE_START));
    }

    #[test]
    fn without_paste_lines_are_entered_one_by_one() {
        assert_eq!(prompt_bytes("a\nb\n", Paste::Never), b"a\rb\r\r");
    }

    #[test]
    fn answers() {
        assert_eq!(answer_bytes(Some(&json!(true)), true), b"y\r");
        assert_eq!(answer_bytes(None, true), b"n\r");
        assert_eq!(answer_bytes(None, false), vec![CTRL_C]);
        assert_eq!(
            answer_bytes(Some(&json!({"Which DB?": "pg"})), false),
            b"pg\r"
        );
        assert_eq!(answer_bytes(Some(&json!("a\x1bb")), false), b"ab\r");
    }
}
