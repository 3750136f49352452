//! One AFL++ target binary for every decoder of the fuzz crate: `CAPFLEET_AFL_TARGET`
//! names it (`stream_json`, `pty`, …; see `capfleet_fuzz::targets::ALL`). A panic is
//! what AFL records as a crash; `run.sh` turns each crash into a kept regression input.
//! `--seeds DIR` writes the target's seeds (in pieces) into DIR, as AFL's inputs.

fn main() {
    let name = std::env::var("CAPFLEET_AFL_TARGET").unwrap_or_else(|_| {
        eprintln!("set CAPFLEET_AFL_TARGET to one of the fuzz crate's targets");
        std::process::exit(2)
    });
    let target = capfleet_fuzz::targets::by_name(&name);
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, dir] = args.as_slice()
        && flag == "--seeds"
    {
        std::fs::create_dir_all(dir).expect("seeds dir");
        for (i, seed) in target.seeds().iter().enumerate() {
            std::fs::write(format!("{dir}/seed-{i:04}"), seed).expect("write seed");
        }
        return;
    }
    afl::fuzz!(|data: &[u8]| (target.run)(data));
}
