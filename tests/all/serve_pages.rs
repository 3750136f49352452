//! No web page gets anything of a default `capfleet serve` (issue 35, point 1): it
//! makes its own token file (its admin token printed once) and never runs open; a
//! token file with no token is refused at start. A real browser on a page of another
//! origin (another loopback port) cannot start a run or answer an ask — by `fetch`
//! (`no-cors` and `cors`, even holding a valid token), by a form post of each
//! encoding, nor as a DNS-rebinding page reaching the server under its own name —
//! while the console, logged in with the token, still approves that ask. Each check
//! is also seen alone over plain HTTP with a valid token: a foreign `Origin` is 403,
//! a foreign `Host` 421, a body of a form's type 415.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::browser::{Browser, DESKTOP};
use crate::common::console::{logged_in, route, sel, wait_text};
use crate::common::fake_llm::http_with;
use crate::common::serve::{PERMISSION, Server, sim_fleet, submission};
use crate::common::{EnvMarker, capfleet, journal_records};

/// A run of a sim session, or an answer shown: a few seconds at most.
const RUN: Duration = Duration::from_secs(60);

/// A fleet whose one session's command line writes `marker`: it ran if the file is
/// there. It asks to run unsandboxed (the marker lies outside its workspace), which
/// only an admin token on a server started with `--allow-unsandboxed` may.
fn marker_fleet(marker: &Path) -> String {
    format!(
        "[fleet]\nname = \"drive-by\"\nstart = [\"s\"]\ntask = \"x\"\nsandbox = \"none\"\n\n\
         [[sessions]]\nname = \"s\"\nagent = \"sim\"\nargv = [\"sh\", \"-c\", \"touch {}\"]\n",
        marker.display()
    )
}

/// A page of another origin: every request to `127.0.0.1:<port>` answered with the
/// same small HTML page, until dropped.
struct HostilePage {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl HostilePage {
    fn start() -> HostilePage {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                conn.set_nonblocking(false).ok();
                conn.set_read_timeout(Some(Duration::from_secs(2))).ok();
                let mut head = [0u8; 4096];
                let _read = conn.read(&mut head);
                let page = "<!doctype html><title>hostile</title><p>a page of another origin</p><iframe name=sink></iframe>";
                let _sent = conn.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                        page.len()
                    )
                    .as_bytes(),
                );
            }
        });
        HostilePage { port, stop }
    }
}

impl Drop for HostilePage {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The open asks of run `id`.
fn open_asks(server: &Server, id: &str) -> Vec<Value> {
    let (status, body) = server.json("GET", &format!("/v1/runs/{id}/asks"), None, None);
    assert_eq!(status, 200, "{body}");
    body["asks"].as_array().cloned().unwrap_or_default()
}

/// Every attack of a page on `target` (the server's base URL): each `fetch`'s outcome
/// (`status N`, `opaque`, or the error), after the forms were posted too.
const ATTACKS: &str = r#"
const [target, fleet, askPath, token] = arguments;
return (async () => {
const out = {};
const attempt = async (name, url, init) => {
  try {
    const r = await fetch(url, init);
    out[name] = r.type === "opaque" ? "opaque" : "status " + r.status;
  } catch (e) {
    out[name] = "error " + e.name;
  }
};
const runs = target + "/v1/runs";
const ask = target + askPath;
const allow = JSON.stringify({decision: "allow_once"});
await attempt("no-cors toml", runs, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: fleet});
await attempt("no-cors json", runs, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: JSON.stringify({fleet})});
await attempt("no-cors typeless", runs, {method: "POST", mode: "no-cors", body: new Blob([fleet])});
await attempt("cors toml with a token", runs, {method: "POST", headers: {"Content-Type": "application/toml", "Authorization": "Bearer " + token}, body: fleet});
await attempt("cors json", runs, {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({fleet})});
await attempt("no-cors answer", ask, {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: allow});
await attempt("cors answer with a token", ask, {method: "POST", headers: {"Content-Type": "application/json", "Authorization": "Bearer " + token}, body: allow});
await attempt("no-cors cancel", target + askPath.replace(/\/asks\/.*/, "/cancel"), {method: "POST", mode: "no-cors"});
for (const [enctype, action] of [["text/plain", runs], ["multipart/form-data", runs], ["application/x-www-form-urlencoded", runs], ["text/plain", ask]]) {
  const form = document.createElement("form");
  form.method = "POST";
  form.action = action;
  form.enctype = enctype;
  form.target = "sink";
  const input = document.createElement("input");
  input.name = action === ask ? '{"decision": "allow_once", "x": "' : "pad";
  input.value = action === ask ? '"}' : '"1"\n' + fleet;
  form.appendChild(input);
  document.body.appendChild(form);
  form.submit();
  await new Promise((r) => setTimeout(r, 300));
  out["form " + enctype + " to " + (action === ask ? "the ask" : "runs")] = "posted";
}
return out;
})();
"#;

/// The same-origin requests of a DNS-rebinding page (it reached the server under its
/// own name): each answer's status and code, which the page can read.
const REBOUND: &str = r#"
const [fleet, askPath, token] = arguments;
return (async () => {
const out = {};
const read = async (name, path, init) => {
  try {
    const r = await fetch(path, init);
    const body = await r.text();
    out[name] = r.status + " " + (JSON.parse(body || "{}").code || "");
  } catch (e) {
    out[name] = "error " + e.name;
  }
};
await read("submit", "/v1/runs", {method: "POST", headers: {"Content-Type": "application/toml", "Authorization": "Bearer " + token}, body: fleet});
await read("answer", askPath, {method: "POST", headers: {"Content-Type": "application/json", "Authorization": "Bearer " + token}, body: JSON.stringify({decision: "allow_once"})});
await read("list", "/v1/runs", {headers: {"Authorization": "Bearer " + token}});
await read("health", "/healthz", {});
return out;
})();
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_origin_runs_nothing_and_the_console_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_owned();
    let m = EnvMarker::new("serve-pages");
    let marker = d.join("drive-by-ran");
    let fleet = marker_fleet(&marker);
    let pair = (m.pair().0.to_owned(), m.pair().1.to_owned());
    // A default server, a run waiting on a permission (the ask a page would answer).
    let (server, id, ask_id) = tokio::task::spawn_blocking(move || {
        let server = Server::start(&d, &["--allow-unsandboxed"]);
        let waiting = submission(
            &sim_fleet("ask", 1, (&pair.0, &pair.1)),
            &[("script.toml", PERMISSION)],
        );
        let id = server.submit(None, &waiting)["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let asks =
            crate::common::wait_until(Duration::from_secs(60), Duration::from_millis(50), || {
                !open_asks(&server, &id).is_empty()
            });
        assert!(asks, "the run asks\n{}", server.stderr());
        let ask_id = open_asks(&server, &id)[0]["ask_id"]
            .as_str()
            .unwrap()
            .to_owned();
        (server, id, ask_id)
    })
    .await
    .unwrap();
    let base = format!("http://127.0.0.1:{}", server.port);
    let ask_path = format!("/v1/runs/{id}/asks/{ask_id}");
    let token = server.admin().to_owned();
    let page = HostilePage::start();
    let b = Browser::start_with(
        "serve-pages",
        DESKTOP,
        &[
            "--host-resolver-rules=MAP rebind.test 127.0.0.1",
            // Plain HTTP to that name, as a rebinding page has it.
            "--disable-features=HttpsUpgrades,HttpsFirstBalancedModeAutoEnable",
        ],
    )
    .await;

    // A page of another origin (another port of this host).
    b.open(&format!("http://127.0.0.1:{}/", page.port)).await;
    let out = b
        .js(
            ATTACKS,
            vec![json!(base), json!(fleet), json!(ask_path), json!(token)],
        )
        .await;
    eprintln!("the page's attempts: {out}");
    // Whatever a cross-origin `fetch` could read was refused: the preflight failed.
    for name in [
        "cors toml with a token",
        "cors json",
        "cors answer with a token",
    ] {
        assert_eq!(out[name], "error TypeError", "{name}: {out}");
    }
    b.shot("hostile-page").await;

    // A rebinding page: the server reached as `rebind.test`, same-origin, answers
    // readable — and refused, probes included.
    b.open(&format!("http://rebind.test:{}/", server.port))
        .await;
    let rebound = b
        .js(REBOUND, vec![json!(fleet), json!(ask_path), json!(token)])
        .await;
    for name in ["submit", "answer", "list", "health"] {
        assert_eq!(rebound[name], "421 unknown_host", "{name}: {rebound}");
    }

    // Nothing ran, nothing was answered: one run on the server, its ask still open.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!marker.exists(), "a page's fleet ran");
    let (s, c, i) = (server, id, ask_id);
    let (server, id, ask_id) = tokio::task::spawn_blocking(move || {
        let (status, listed) = s.json("GET", "/v1/runs", None, None);
        assert_eq!(status, 200);
        assert_eq!(listed["runs"].as_array().map(Vec::len), Some(1), "{listed}");
        let asks = open_asks(&s, &c);
        assert_eq!(asks.len(), 1, "{asks:?}");
        assert_eq!(asks[0]["ask_id"], i.as_str());
        let said = s.stderr();
        assert!(
            said.contains("another origin"),
            "the refusals are logged: {said}"
        );
        assert!(
            !said.contains(&s.admin().to_owned()),
            "the token shows nowhere"
        );
        (s, c, i)
    })
    .await
    .unwrap();

    // The console, logged in with the token, still answers that ask.
    logged_in(&b, &base, &token).await;
    route(&b, "#/approvals").await;
    let one = format!("{}[data-ask-id=\"{ask_id}\"]", sel("approval"));
    b.element(&format!("{one} {}", sel("approve-once")))
        .await
        .click()
        .await
        .unwrap();
    wait_text(
        &b,
        &format!("{one} {}", sel("answered")),
        "Answered by admin",
        Duration::from_secs(15),
    )
    .await;
    b.shot("console-approved").await;
    b.quit().await;
    let server = tokio::task::spawn_blocking(move || {
        let run = server.wait_run(&id, None, Duration::from_secs(60));
        assert_eq!(run["state"], "completed", "{run}");
        let decisions: Vec<Value> = journal_records(&server.journal(&id))
            .iter()
            .filter(|r| r["event"]["kind"] == "cap.permission.response")
            .map(|r| r["event"]["_meta"]["capfleet.rule"].clone())
            .collect();
        assert_eq!(decisions, [json!("remote:admin")]);
        // The page's fleet does run when its owner submits it: the marker was a
        // fair witness.
        let created = server.submit(None, &submission(&fleet, &[]));
        assert!(created["id"].is_string(), "{created}");
        let ran = crate::common::wait_until(RUN, Duration::from_millis(50), || marker.exists());
        assert!(ran, "the fleet's command ran for its owner");
        server
    })
    .await
    .unwrap();
    drop(server);
    drop(page);
}

/// A POST to `server` with a valid token, `headers` (curl's own `Host` and
/// `Content-Type` replaced, or dropped when not given) and `body`; its status and
/// code.
fn with_token(server: &Server, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let mut curl = std::process::Command::new("curl");
    curl.args([
        "-s",
        "-X",
        "POST",
        "--data-binary",
        "@-",
        "-w",
        "\n%{http_code}",
    ])
    .args(["-H", &format!("Authorization: Bearer {}", server.admin())]);
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        curl.args(["-H", "Content-Type:"]);
    }
    for (k, v) in headers {
        curl.args(["-H", &format!("{k}: {v}")]);
    }
    let mut child = curl
        .arg(format!("http://127.0.0.1:{}{path}", server.port))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("curl");
    child.stdin.take().unwrap().write_all(body).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (answer, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    let code = serde_json::from_str::<Value>(answer).unwrap_or(Value::Null)["code"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    (status.trim().parse().unwrap_or(0), code)
}

/// A request that is refused: what it is, its headers and body, the status and code.
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a [u8], (u16, &'a str));

#[test]
fn each_check_alone_refuses_before_the_body_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let m = EnvMarker::new("serve-checks");
    let marker = dir.path().join("ran");
    let server = Server::start(dir.path(), &[]);
    let fleet = marker_fleet(&marker);
    let json_body = json!({"fleet": fleet}).to_string();
    let own = format!("http://127.0.0.1:{}", server.port);
    let cases: Vec<Case> = vec![
        (
            "a foreign origin",
            vec![
                ("Content-Type", "application/json"),
                ("Origin", "http://127.0.0.1:1"),
            ],
            json_body.as_bytes(),
            (403, "foreign_origin"),
        ),
        (
            "an opaque origin, cross-site",
            vec![
                ("Content-Type", "application/json"),
                ("Origin", "null"),
                ("Sec-Fetch-Site", "cross-site"),
            ],
            json_body.as_bytes(),
            (403, "foreign_origin"),
        ),
        (
            "a rebinding host",
            vec![
                ("Content-Type", "application/json"),
                ("Host", "rebind.test:7878"),
            ],
            json_body.as_bytes(),
            (421, "unknown_host"),
        ),
        (
            "text/plain",
            vec![("Content-Type", "text/plain")],
            fleet.as_bytes(),
            (415, "unsupported_media_type"),
        ),
        (
            "a form",
            vec![("Content-Type", "application/x-www-form-urlencoded")],
            b"fleet=x",
            (415, "unsupported_media_type"),
        ),
        (
            "no type",
            vec![],
            fleet.as_bytes(),
            (415, "unsupported_media_type"),
        ),
    ];
    for (what, headers, body, want) in cases {
        let got = with_token(&server, "/v1/runs", &headers, body);
        assert_eq!((got.0, got.1.as_str()), want, "{what}");
    }
    // The server's own origin passes (the console's posts), and so does a client
    // that is no page.
    let (status, code) = with_token(
        &server,
        "/v1/fleets/validate",
        &[
            ("Content-Type", "application/json"),
            ("Origin", own.as_str()),
        ],
        json_body.as_bytes(),
    );
    assert_eq!((status, code.as_str()), (200, ""));
    // An answer is JSON only, whatever its body says.
    let id = server.submit_script(None, m.pair(), PERMISSION);
    let asks =
        crate::common::wait_until(Duration::from_secs(60), Duration::from_millis(50), || {
            !open_asks(&server, &id).is_empty()
        });
    assert!(asks);
    let ask_id = open_asks(&server, &id)[0]["ask_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = format!("/v1/runs/{id}/asks/{ask_id}");
    let (status, code) = with_token(
        &server,
        &answer,
        &[("Content-Type", "text/plain")],
        br#"{"decision": "allow_once"}"#,
    );
    assert_eq!((status, code.as_str()), (415, "unsupported_media_type"));
    assert_eq!(open_asks(&server, &id).len(), 1, "still open");
    let (status, code) = with_token(
        &server,
        &answer,
        &[("Content-Type", "application/json")],
        br#"{"decision": "allow_once"}"#,
    );
    assert_eq!((status, code.as_str()), (200, ""));
    assert!(!marker.exists());
    assert_eq!(
        server.wait_run(&id, None, Duration::from_secs(60))["state"],
        "completed"
    );
}

#[test]
fn a_default_server_makes_its_token_once_and_refuses_a_file_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let first = Server::start(dir.path(), &[]);
    let file = dir.path().join(".capfleet/tokens.txt");
    let said = first.stderr();
    assert!(
        said.contains(&format!("made {}", file.display())) && !said.contains(first.admin()),
        "{said}"
    );
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(
        !std::fs::read_to_string(&file)
            .unwrap()
            .contains(first.admin())
    );
    // Nothing without the token, on any route but the probes and the console's page.
    for auth in [vec![], vec![("Authorization", "Bearer cft_wrong")]] {
        let r = http_with(first.port, "GET", "/v1/runs", &auth, b"").unwrap();
        assert_eq!(r.status, 401, "{auth:?}");
    }
    assert_eq!(
        http_with(first.port, "GET", "/healthz", &[], b"")
            .unwrap()
            .status,
        200
    );
    let (status, me) = first.json("GET", "/v1/me", None, None);
    assert_eq!(
        (status, &me["name"], &me["role"]),
        (200, &json!("admin"), &json!("admin"))
    );
    drop(first);
    // The next start finds the file: no new token printed.
    let second = Server::start(dir.path(), &[]);
    assert!(!second.stderr().contains("made "), "{}", second.stderr());
    assert_eq!(second.json("GET", "/v1/me", None, None).0, 200);
    drop(second);
    // Every token revoked (its line removed or commented out): refused at start,
    // naming the file.
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("# {text}")).unwrap();
    let out = capfleet(dir.path())
        .args(["serve", "--addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&file.display().to_string()) && err.contains("no token"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no token made over a revoked file");
}
