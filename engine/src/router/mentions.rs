//! `@cap://` mentions in assistant text (spec §10.3): a line holding
//! `@cap://<session> <message>` (or `@cap://<fleet>/<session> <message>`) asks the
//! orchestrator to deliver `<message>` to that session.

use std::sync::LazyLock;

use regex::Regex;

/// One mention: the target session's name and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mention {
    pub to: String,
    pub message: String,
}

static MENTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"@cap://(?:[A-Za-z0-9_.-]+/)?([A-Za-z0-9_.-]+)[ \t]+([^\n]+)")
        .expect("the mention pattern compiles")
});

/// Every mention in `text`, in order, each once: the message runs to the end of its
/// line, and the same mention (target and message) written again in one result is
/// one delivery, not two.
pub(crate) fn mentions(text: &str) -> Vec<Mention> {
    let mut found: Vec<Mention> = Vec::new();
    for c in MENTION.captures_iter(text) {
        let m = Mention {
            to: c[1].to_owned(),
            message: c[2].trim().to_owned(),
        };
        if !m.message.is_empty() && !found.contains(&m) {
            found.push(m);
        }
    }
    found
}

/// The target of a `_meta.cap.message_to` value (`cap://fleet/name` or `name`).
pub(crate) fn target_of(urn_or_name: &str) -> &str {
    let rest = urn_or_name.strip_prefix("cap://").unwrap_or(urn_or_name);
    rest.rsplit('/').next().unwrap_or(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_mentions_with_and_without_fleet() {
        let text = "done.\n@cap://worker-b please check the IPC frame format\nand @cap://demo/reviewer look at it too";
        let m = mentions(text);
        assert_eq!(m.len(), 2);
        assert_eq!(
            m[0],
            Mention {
                to: "worker-b".into(),
                message: "please check the IPC frame format".into()
            }
        );
        assert_eq!(m[1].to, "reviewer");
        assert_eq!(m[1].message, "look at it too");
    }

    #[test]
    fn the_same_mention_twice_in_one_result_is_one() {
        let text = "@cap://worker-b run the tests\nthen\n@cap://demo/worker-b run the tests\n\
                    @cap://worker-b run the lints";
        let m = mentions(text);
        let messages: Vec<&str> = m.iter().map(|m| m.message.as_str()).collect();
        assert_eq!(messages, ["run the tests", "run the lints"]);
    }

    #[test]
    fn a_bare_mention_without_message_is_ignored() {
        assert!(mentions("see @cap://worker-b").is_empty());
        assert!(mentions("no mentions here").is_empty());
    }

    #[test]
    fn message_to_targets() {
        assert_eq!(target_of("cap://demo/worker-a"), "worker-a");
        assert_eq!(target_of("worker-a"), "worker-a");
    }
}
