//! The manifest's patterns (spec §5.4): what the regex flavour refuses, by name;
//! syntax errors naming the field; Python-style named groups; multi-line patterns.

use super::*;

#[test]
fn unsupported_regex_constructs_are_named() {
    let cases = [
        (
            "[parse]\nask_yes_no = \"continue(?= now)\"\n",
            "parse.ask_yes_no",
            RegexConstruct::LookAhead,
            "look-ahead",
        ),
        (
            "[parse]\nplan_section = \"(?!x)plan\"\n",
            "parse.plan_section",
            RegexConstruct::LookAhead,
            "look-ahead",
        ),
        (
            "[parse]\nidle = [\"^> $\", \"(?<=a)b\"]\n",
            "parse.idle[1]",
            RegexConstruct::LookBehind,
            "look-behind",
        ),
        (
            "[parse]\nerror_lines = [\"(?<!a)b\"]\n",
            "parse.error_lines[0]",
            RegexConstruct::LookBehind,
            "look-behind",
        ),
        (
            "[parse]\ntool_call_end = '(\\w+) \\1'\n",
            "parse.tool_call_end",
            RegexConstruct::Backreference,
            "backreference",
        ),
        (
            "[parse]\nask_options = '(?<q>x)\\k<q>'\n",
            "parse.ask_options",
            RegexConstruct::Backreference,
            "backreference",
        ),
        (
            "[probe]\nversion_pattern = '(a)\\2'\n",
            "probe.version_pattern",
            RegexConstruct::Backreference,
            "backreference",
        ),
    ];
    for (extra, key, construct, word) in cases {
        let errs = parse_err(&minimal_without(&[], extra));
        assert_eq!(errs.len(), 1, "{errs}");
        let e = &errs.errors[0];
        match e {
            ManifestError::UnsupportedRegex { construct: c, .. } => {
                assert_eq!(*c, construct, "{key}")
            }
            other => panic!("{key}: unexpected {other}"),
        }
        assert_eq!(e.key(), Some(key));
        assert!(e.to_string().contains(word), "{e}");
    }
    // In startup.ready_when and agent.version_match too.
    let src = minimal_without(&["startup.ready_when"], "")
        .replace(
            "[startup]\n",
            "[startup]\nready_when = { pattern = \"(?=ready)\" }\n",
        )
        .replace("[agent]\n", "[agent]\nversion_match = \"(?<=v)2\"\n");
    let errs = parse_err(&src);
    let keys: Vec<&str> = errs.iter().filter_map(|e| e.key()).collect();
    assert_eq!(
        keys,
        ["agent.version_match", "startup.ready_when.pattern"],
        "{errs}"
    );
}

#[test]
fn regex_syntax_error_names_field() {
    let errs = parse_err(&minimal_without(
        &[],
        "[parse]\nplan_section = \"(unclosed\"\n",
    ));
    let e = &errs.errors[0];
    assert!(matches!(e, ManifestError::Regex { .. }), "{e}");
    assert_eq!(e.key(), Some("parse.plan_section"));
    assert!(e.to_string().contains("unclosed"), "{e}");
}

#[test]
fn python_named_groups_are_accepted() {
    let v = parse_ok(&minimal_without(
        &[],
        "[parse]\ntool_call_start = \"^● (?P<tool>\\\\w+)\\\\((?P<args>.*)\\\\)$\"\n",
    ));
    let re = v.manifest.patterns.tool_call_start.expect("compiled");
    let c = re.captures("text\n● Bash(ls -la)\nmore").expect("match");
    assert_eq!((&c["tool"], &c["args"]), ("Bash", "ls -la"));
}

#[test]
fn patterns_are_multi_line() {
    let v = parse_ok(&minimal_without(&[], "[parse]\nidle = \"^> $\"\n"));
    let idle = &v.manifest.patterns.idle;
    assert_eq!(idle.len(), 1);
    let screen = "Welcome to the agent\nsome output\n> ";
    assert!(idle[0].is_match(screen));
    assert!(idle[0].is_match("header\n> \nfooter"));
    assert!(!idle[0].is_match("header\nx > \nfooter"));
    // CRLF line ends do not defeat `$`.
    assert!(idle[0].is_match("header\r\n> \r\nfooter"));
}
