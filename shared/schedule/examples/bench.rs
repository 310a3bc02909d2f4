//! Times the scheduler on seeded conferences and writes each program and Bridle's result as
//! JSON, for `scripts/schedule-vs-cpsat` to solve the very same instances with CP-SAT.
//!
//! `cargo run --release -p schedule --example bench -- --sizes 20,100,400 --seed 7 --dump DIR`
//! (`--crowded` first times `generate::crowded`, which ends at the work limit).

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let sizes: Vec<usize> = arg("--sizes")
        .unwrap_or_else(|| "20,100,400".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("--sizes takes numbers like 20,100,400")
        })
        .collect();
    let seed: u64 = arg("--seed").map_or(7, |s| s.parse().expect("--seed takes a number"));
    let dump = arg("--dump");
    if let Some(dir) = &dump {
        std::fs::create_dir_all(dir).expect("create the dump folder");
    }
    println!(
        "{:>6} {:>9} {:>9} {:>6} {:>10} {:>7} {:>11}",
        "size", "feasible", "makespan", "bound", "seconds", "passes", "work"
    );
    if args.iter().any(|a| a == "--crowded") {
        // The program tools' caps shaped to be hard (`generate::crowded`): ends at the work
        // limit.
        let program = schedule::generate::crowded();
        let t0 = Instant::now();
        let result = schedule::plan(&program, None);
        let seconds = t0.elapsed().as_secs_f64();
        let (feasible, makespan, passes, work) = match &result {
            Ok(p) => (true, p.stats.makespan, p.stats.passes, p.stats.work),
            Err(_) => (false, 0, 0, 0),
        };
        let bound = schedule::lower_bound(&program);
        println!(
            "{:>6} {feasible:>9} {makespan:>9} {bound:>6} {seconds:>10.5} {passes:>7} {work:>11}",
            "crowd"
        );
    }
    for n in sizes {
        let program = schedule::generate::conference(n, seed);
        // Repeat small runs so the time is not just the timer's resolution.
        let reps = (2000 / n.max(1)).clamp(1, 50);
        let t0 = Instant::now();
        let mut result = None;
        for _ in 0..reps {
            result = Some(schedule::plan(&program, None));
        }
        let seconds = t0.elapsed().as_secs_f64() / reps as f64;
        let result = result.unwrap();
        let (feasible, makespan, bound, passes, work) = match &result {
            Ok(p) => (
                true,
                p.stats.makespan,
                p.stats.lower_bound,
                p.stats.passes,
                p.stats.work,
            ),
            Err(_) => (false, 0, schedule::lower_bound(&program), 0, 0),
        };
        if let Ok(p) = &result
            && let Err(e) = schedule_check::verify(&program, &p.timetable)
        {
            panic!("the checker rejected the scheduler's timetable for n={n}: {e}");
        }
        println!(
            "{n:>6} {feasible:>9} {makespan:>9} {bound:>6} {seconds:>10.5} {passes:>7} {work:>11}"
        );
        if let Some(dir) = &dump {
            let write = |name: String, v: serde_json::Value| {
                std::fs::write(
                    format!("{dir}/{name}"),
                    serde_json::to_string_pretty(&v).unwrap(),
                )
                .expect("write the dump");
            };
            write(
                format!("program-{n}.json"),
                serde_json::to_value(&program).unwrap(),
            );
            let out = serde_json::json!({
                "size": n, "seed": seed, "feasible": feasible, "makespan": makespan,
                "lower_bound": bound, "seconds": seconds,
                "reasons": result.as_ref().err().map(|e| e.to_string()),
                "timetable": result.as_ref().ok().map(|p| &p.timetable),
            });
            write(format!("bridle-{n}.json"), out);
        }
    }
}
