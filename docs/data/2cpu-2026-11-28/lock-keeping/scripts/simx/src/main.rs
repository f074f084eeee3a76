//! Reads validation evidence (`evidence.jsonl`, one configuration a line)
//! on stdin and simulates every processes-mode `execl` profile in it on a
//! preset machine (the first argument) at 2, 16, 64 and 384 CPUs, with the
//! i_mmap locks as rwsem, std and numa in turn, with the simulation of the
//! checkout this is built in: a way to see what a change to the simulation
//! does to the 12-node projection, profile for profile.
use std::io::BufRead;

use vmproject::{ops_per_cpu_for, simulate, Config, LockKind, Machine, Profile};

fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| "12x32".to_string());
    let Some(machine) = Machine::preset(&name) else {
        eprintln!("simx: no preset machine {name}");
        std::process::exit(2);
    };
    println!("{name}: ops/s at 2, 16, 64, 384 CPUs; i_mmap lock rwsem | std | numa");
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("reading stdin");
        let evidence: serde_json::Value = serde_json::from_str(&line).expect("evidence line");
        let profile: Profile =
            serde_json::from_value(evidence["profile"].clone()).expect("a profile");
        if profile.workload != "execl" || profile.lock != "rwsem" {
            continue;
        }
        let mut row = format!("{:7} {:13}", profile.index, profile.imap);
        for lock in [LockKind::Rwsem, LockKind::Std, LockKind::Numa] {
            for cpus in [2, 16, 64, 384] {
                let config = Config {
                    cpus,
                    lock: Some(lock),
                    seed: 1,
                    ops_per_cpu: ops_per_cpu_for(&profile),
                    spin_budget_ns: None,
                };
                let r = simulate(&profile, &machine, &config).expect("simulation");
                row += &format!(" {:>8.0}", r.ops_per_sec);
            }
            row += " |";
        }
        println!("{row}");
    }
}
