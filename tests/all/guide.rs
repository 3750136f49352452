//! The README and the user guide (`docs/guide/`) say what capfleet does; these tests
//! run what they show. Every ` ```console ` block of a page runs as written against
//! the built binary and the simulator agent (`common::guide` says how a block is
//! read), each page a test of its own; every page of the guide is one of them, and
//! every relative link of the docs leads to a file that exists.

use crate::common::guide::{relative_links, run_page};
use crate::common::repo_root;

macro_rules! pages {
    ($($test:ident => $page:literal),* $(,)?) => {
        /// Every page whose examples run, from the repository's root.
        const PAGES: &[&str] = &[$($page),*];
        $(
            #[test]
            fn $test() {
                run_page($page);
            }
        )*
    };
}

pages! {
    readme_tour => "README.md",
    guide_install => "docs/guide/install.md",
    guide_agents => "docs/guide/agents.md",
    guide_fleets => "docs/guide/fleets.md",
    guide_sessions => "docs/guide/sessions.md",
    guide_workspaces => "docs/guide/workspaces.md",
    guide_durability => "docs/guide/durability.md",
    guide_chaos => "docs/guide/chaos.md",
    guide_serve => "docs/guide/serve.md",
    guide_console => "docs/guide/console.md",
    guide_a2a_expose => "docs/guide/a2a-expose.md",
    guide_nats => "docs/guide/nats.md",
    guide_as_an_agent => "docs/guide/as-an-agent.md",
    guide_observability => "docs/guide/observability.md",
    guide_sandboxing => "docs/guide/sandboxing.md",
    guide_status => "docs/guide/status.md",
    guide_development => "docs/guide/development.md",
}

#[test]
fn every_guide_page_is_run_and_every_link_leads_somewhere() {
    let root = repo_root();
    let mut docs = vec![root.join("README.md"), root.join("docs/ARCHITECTURE.md")];
    for entry in std::fs::read_dir(root.join("docs/guide")).expect("docs/guide") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            let page = path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            // The index only lists the pages; every other page shows examples.
            assert!(
                page.ends_with("guide/README.md") || PAGES.contains(&page.as_str()),
                "{page} is not in tests/all/guide.rs: its examples would never run"
            );
            docs.push(path);
        }
    }
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        let dir = doc.parent().unwrap();
        for link in relative_links(&text) {
            assert!(
                dir.join(&link).exists(),
                "{}: the link `{link}` leads nowhere",
                doc.display()
            );
        }
    }
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines: the rest belongs in docs/guide/"
    );
}
