//! `capfleet manifest validate <file>...`: every error, with file, line, key and reason.

use std::process::ExitCode;

use capfleet_engine::manifest::Manifest;

use capfleet_app::style::{ColorChoice, Style};

#[derive(Debug, clap::Subcommand)]
pub(crate) enum ManifestCommand {
    /// Validate manifests against CAP §5 (and the coding profile's section); prints
    /// every error and warning. Exit codes: 0 all valid, 1 any invalid.
    Validate {
        /// Manifest files (cap-agent.toml).
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
        /// Treat warnings (unknown keys) as errors.
        #[arg(long)]
        strict: bool,
    },
}

pub(crate) fn run(command: ManifestCommand, color: ColorChoice) -> ExitCode {
    match command {
        ManifestCommand::Validate { files, strict } => validate(&files, strict, color),
    }
}

fn validate(files: &[std::path::PathBuf], strict: bool, color: ColorChoice) -> ExitCode {
    let out = Style::for_stdout(color);
    let err = Style::for_stderr(color);
    let mut failed = 0usize;
    for file in files {
        match Manifest::load(file) {
            Ok(v) => {
                for w in &v.warnings {
                    eprintln!("{} {w}", err.warn("warning:"));
                }
                if strict && !v.warnings.is_empty() {
                    failed += 1;
                    eprintln!(
                        "{} {}: warnings are errors under --strict",
                        err.err("error:"),
                        file.display()
                    );
                } else {
                    println!(
                        "{} {} ({})",
                        out.ok("valid"),
                        file.display(),
                        v.manifest.agent.name
                    );
                }
            }
            Err(errors) => {
                failed += 1;
                for e in errors.iter() {
                    eprintln!("{} {e}", err.err("error:"));
                }
            }
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        eprintln!("{failed} of {} manifest(s) invalid", files.len());
        ExitCode::FAILURE
    }
}
