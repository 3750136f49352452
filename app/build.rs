//! Embeds the shipped agent manifests (`config/agents/*.toml`) into the binary, so an
//! installed capfleet resolves them without the source tree.

use std::{env, fmt::Write as _, fs, path::Path};

fn main() {
    // At run time, not `env!`: a target dir reused from another checkout keeps its
    // compiled build script, which would embed that checkout's manifests.
    let root = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&root).join("../config/agents");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut entries: Vec<_> = fs::read_dir(&dir)
        .expect("config/agents must exist")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    entries.sort();
    let mut out = String::from(
        "/// Shipped manifests: `(registry name, TOML source)`.\npub const SHIPPED: &[(&str, &str)] = &[\n",
    );
    for path in entries {
        println!("cargo:rerun-if-changed={}", path.display());
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("UTF-8 manifest file name");
        writeln!(
            out,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        )
        .unwrap();
    }
    out.push_str("];\n");
    let own = dir.join("capfleet.toml");
    assert!(
        own.is_file(),
        "config/agents/capfleet.toml (capfleet's own manifest) is missing"
    );
    writeln!(
        out,
        "/// capfleet's own manifest as an agent (`capfleet --cap-manifest`).\npub const OWN_MANIFEST: &str = include_str!({:?});",
        own.display().to_string()
    )
    .unwrap();
    let dest = Path::new(&env::var("OUT_DIR").unwrap()).join("shipped_manifests.rs");
    fs::write(dest, out).unwrap();
}
