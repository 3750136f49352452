//! `capfleet resolve <agent>`: where the manifest came from, the validated manifest
//! and the binding that would drive the agent.

use std::process::ExitCode;

use capfleet_wire::registry::{Resolved, Selection, select_binding};
use serde_json::json;

use capfleet_app::agents::registry;
use capfleet_app::sandboxing::{Planned, Workspace};
use std::path::PathBuf;

/// Where the agent's binary is, or why it is not there.
type Binary = Result<std::path::PathBuf, String>;
use capfleet_app::style::{ColorChoice, Style};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "The binary line says where the agent's binary is, or that it is not on PATH \
(with the manifest's install hint, `agent.x-install`, when it has one): `chat` and `run` refuse \
an agent whose binary is missing.

Exit codes: 0 resolved (even when the binary is missing), 1 no valid manifest (cap_manifest_missing)."
)]
pub(crate) struct ResolveArgs {
    /// An agent name (registry key, e.g. `sim`) or a path to a manifest file.
    agent: String,
    /// Print one JSON object (source, binding, skipped bindings, warnings, manifest).
    #[arg(long)]
    json: bool,
    /// Also say the sandbox a session of this agent would get here (`sandbox =
    /// "workspace"` in the current directory, with the --sandbox-* details): the
    /// backend, what it may write and read, what it cannot see, what is not enforced.
    #[arg(long)]
    sandbox: bool,
    #[command(flatten)]
    details: capfleet_app::sandboxing::SandboxFlags,
}

pub(crate) fn run(args: ResolveArgs, color: ColorChoice) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("capfleet: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let resolved = match runtime.block_on(registry().resolve(&args.agent)) {
        Ok(r) => r,
        Err(e) => {
            let style = Style::for_stderr(color);
            eprintln!("{} {e}", style.err("error:"));
            return ExitCode::FAILURE;
        }
    };
    let selection = select_binding(&resolved.manifest, capfleet_wire::driver::SUPPORTED);
    let binary = capfleet_app::agents::binary_status(&resolved.manifest);
    if let Err(missing) = &binary {
        let style = Style::for_stderr(color);
        eprintln!(
            "{} agent `{}`: {missing}; `chat` and `run` refuse it until it is installed",
            style.warn("warning:"),
            resolved.manifest.agent.name
        );
    }
    let peer = a2a_peer(&runtime, &resolved, &selection);
    let sandbox = args.sandbox.then(|| planned(&args, &resolved, &selection));
    let printed = if args.json {
        print_json(&args.agent, &resolved, &selection, &binary, peer.as_ref()).map(|mut out| {
            if let Some((planned, ws)) = &sandbox {
                out["sandbox"] = planned.json(&Workspace::Resolved);
                out["sandbox_cwd"] = json!(ws.display().to_string());
            }
            Some(out)
        })
    } else {
        let said = (sandbox.as_ref()).map_or_else(Vec::new, |(p, _)| p.lines(&Workspace::Resolved));
        if let Some(peer) = &peer {
            print_peer(peer, Style::for_stdout(color));
        }
        print_text(
            &args.agent,
            &resolved,
            &selection,
            &binary,
            &said,
            Style::for_stdout(color),
        )
        .map(|()| None)
    };
    let printed = printed.and_then(|out| match out {
        Some(out) => serde_json::to_string_pretty(&out)
            .map(|text| println!("{text}"))
            .map_err(|e| e.to_string()),
        None => Ok(()),
    });
    match printed {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("capfleet: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What the A2A peer's card says, when A2A is the binding: read as a start reads it.
type PeerCard = Result<capfleet_wire::driver::Discovery, String>;

fn a2a_peer(runtime: &tokio::runtime::Runtime, r: &Resolved, sel: &Selection) -> Option<PeerCard> {
    use capfleet_engine::manifest::AddressFastPath;
    if sel.binding != capfleet_wire::registry::Binding::A2a {
        return None;
    }
    let AddressFastPath::Address(base) = &r.manifest.fast_path.a2a_serve_at else {
        return None;
    };
    let found = runtime.block_on(capfleet_wire::driver::discover(base, &r.manifest.a2a));
    Some(found.map_err(|e| e.to_string()))
}

fn print_peer(peer: &PeerCard, style: Style) {
    let d = match peer {
        Ok(d) => d,
        Err(e) => {
            println!("{}  {e}", style.warn("a2a     "));
            return;
        }
    };
    let c = &d.card;
    println!(
        "{}  {} {} ({})",
        style.bold("a2a card"),
        c.name,
        c.version,
        c.card_url
    );
    println!("{}  {}", style.bold("spelling"), d.choice.spelling.as_str());
    println!("{}  {}", style.bold("endpoint"), d.choice.endpoint);
    for i in &c.interfaces {
        println!(
            "{}  {} {} {}",
            style.dim("iface   "),
            i.binding,
            i.version,
            i.url
        );
    }
    println!("{}  {}", style.bold("skills  "), c.skills.join(", "));
    let auth: Vec<String> = c
        .schemes
        .iter()
        .map(|s| format!("{} ({:?})", s.name, s.kind))
        .collect();
    let auth = if auth.is_empty() {
        "none".to_owned()
    } else {
        auth.join(", ")
    };
    println!("{}  {auth}", style.bold("auth    "));
}

fn print_text(
    agent: &str,
    r: &Resolved,
    sel: &Selection,
    binary: &Binary,
    sandbox: &[String],
    style: Style,
) -> Result<(), String> {
    let toml = r
        .manifest
        .to_toml_string()
        .map_err(|e| format!("cannot print the manifest: {e}"))?;
    println!("{}  {}", style.bold("agent   "), r.manifest.agent.name);
    if r.manifest.agent.name != agent {
        println!("{}  {agent}", style.dim("asked   "));
    }
    println!("{}  {}", style.bold("source  "), r.source);
    match binary {
        Ok(path) => println!("{}  {}", style.bold("binary  "), path.display()),
        Err(missing) => println!("{}  {missing}", style.warn("binary  ")),
    }
    println!(
        "{}  {}",
        style.bold("binding "),
        style.ok(sel.binding.as_str())
    );
    for (binding, reason) in &sel.skipped {
        println!("{}  {binding}: {reason}", style.dim("skipped "));
    }
    match capfleet_wire::driver::queued_input(&r.manifest, sel.binding) {
        Ok(()) => println!(
            "{}  yes over {}: a prompt for a session mid-turn joins the running turn",
            style.bold("steering"),
            sel.binding
        ),
        Err(why) => println!(
            "{}  no: {why}; a prompt for a session mid-turn waits for the turn's end",
            style.bold("steering")
        ),
    }
    for f in &r.flags {
        println!("{}  {f}", style.bold("flag    "));
    }
    if r.warnings.is_empty() {
        println!("{}  none", style.bold("warnings"));
    }
    for w in &r.warnings {
        println!("{}  {w}", style.warn("warning "));
    }
    for line in sandbox {
        println!("{}  {line}", style.bold("sandbox "));
    }
    println!();
    println!("{}", style.dim("# validated manifest, defaults applied"));
    print!("{toml}");
    Ok(())
}

fn print_json(
    agent: &str,
    r: &Resolved,
    sel: &Selection,
    binary: &Binary,
    peer: Option<&PeerCard>,
) -> Result<serde_json::Value, String> {
    let a2a = peer.map(|p| match p {
        Ok(d) => json!({"card": d.card, "spelling": d.choice.spelling.as_str(), "endpoint": d.choice.endpoint}),
        Err(e) => json!({"error": e}),
    });
    let binary = match binary {
        Ok(path) => json!({"path": path.display().to_string()}),
        Err(missing) => json!({"path": null, "error": missing}),
    };
    let out = json!({
        "agent": agent,
        "source": r.source.to_string(),
        "binary": binary,
        "binding": sel.binding.as_str(),
        "steering": match capfleet_wire::driver::queued_input(&r.manifest, sel.binding) {
            Ok(()) => json!({"steers": true}),
            Err(why) => json!({"steers": false, "why": why}),
        },
        "skipped": sel.skipped.iter().map(|(b, why)| json!({"binding": b.as_str(), "reason": why.to_string()})).collect::<Vec<_>>(),
        "warnings": r.warnings.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "flags": r.flags.iter().map(|f| json!({"flag": f.flag, "used": f.used, "why": f.why})).collect::<Vec<_>>(),
        "manifest": r.manifest,
    });
    let mut out = out;
    if let Some(a2a) = a2a {
        out["a2a"] = a2a;
    }
    Ok(out)
}

/// The sandbox a session of the agent would get in the current directory.
fn planned(args: &ResolveArgs, r: &Resolved, sel: &Selection) -> (Planned, PathBuf) {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let spec = args.details.spec(&[]);
    let planned = Planned::of(Some(&spec), sel.binding, &cwd, &r.manifest);
    (planned, cwd)
}
