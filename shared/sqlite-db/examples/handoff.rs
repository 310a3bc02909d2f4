//! What one hand-off to the database's threads costs: sequential empty reads and writes (no
//! sync) on a file database, from one async worker, as a bare turn makes them one after another.
//!
//! `cargo run --profile serve -p sqlite-db --example handoff` measures it as the scheduler places
//! the threads; `taskset -c 0` in front of it keeps every thread on one CPU. The difference is
//! what waking a thread on another, idle CPU costs (on a virtual machine, the halted virtual CPU
//! is woken by the hypervisor).

use sqlite_db::Db;
use std::time::Instant;

const CALLS: u32 = 20_000;

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
    runtime.block_on(async {
        for round in 1..=2 {
            let started = Instant::now();
            for _ in 0..CALLS {
                db.read(|_| Ok::<_, ()>(())).await.unwrap().unwrap();
            }
            let read = started.elapsed().as_secs_f64() * 1e6 / f64::from(CALLS);
            let started = Instant::now();
            for _ in 0..CALLS {
                db.write(|_| Ok::<_, ()>(())).await.unwrap().unwrap();
            }
            let write = started.elapsed().as_secs_f64() * 1e6 / f64::from(CALLS);
            println!(
                "round {round}: an empty read {read:.1} µs, an empty write (its commit, no sync) {write:.1} µs"
            );
        }
    });
    drop(db);
    let _ = std::fs::remove_dir_all(dir);
}
