//! What one hand-off to the database's threads costs: sequential empty reads and writes (no
//! sync) on a file database, from one async worker, as a bare turn makes them one after another;
//! and where the time goes: from the call to its closure starting on the database's thread, and
//! from there (a write's commit included) back to the caller.
//!
//! `cargo run --profile serve -p sqlite-db --example handoff` measures it as the scheduler places
//! the threads; `taskset -c 0` in front of it keeps every thread on one CPU. The difference is
//! what waking a thread on another, idle CPU costs (on a virtual machine, the halted virtual CPU
//! is woken by the hypervisor). A read's thread is usually still awake when the next read comes
//! (it finished so fast that its caller had not gone to sleep either); a write's has gone to
//! sleep, and so has its caller by the time the commit is done.

use sqlite_db::Db;
use std::time::Instant;

const CALLS: usize = 20_000;

/// The median of `v`, in µs.
fn p50(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let dir = std::env::temp_dir().join(format!("sqlite-db-handoff-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temp directory");
    let db = Db::open(dir.join("handoff.db")).expect("the database opens");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let base = Instant::now();
    let us = move || base.elapsed().as_secs_f64() * 1e6;
    runtime.block_on(async {
        for round in 1..=2 {
            for kind in ["read", "write"] {
                let (mut there, mut back) = (Vec::with_capacity(CALLS), Vec::with_capacity(CALLS));
                let started = Instant::now();
                for _ in 0..CALLS {
                    let sent = us();
                    let ran = if kind == "read" {
                        db.read(move |_| Ok::<_, ()>(us())).await
                    } else {
                        db.write(move |_| Ok::<_, ()>(us())).await
                    };
                    let ran = ran.expect("the database answers").expect("no error");
                    back.push(us() - ran);
                    there.push(ran - sent);
                }
                let each = started.elapsed().as_secs_f64() * 1e6 / CALLS as f64;
                println!(
                    "round {round}: an empty {kind} {each:.1} µs (p50: {:.1} µs to its thread, \
                     {:.1} µs back)",
                    p50(there),
                    p50(back)
                );
            }
        }
    });
    drop(db);
    let _ = std::fs::remove_dir_all(dir);
}
