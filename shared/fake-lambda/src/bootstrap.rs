//! A built bootstrap, running.

use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A bootstrap process; killed when dropped, so a failing test leaves nothing running.
#[derive(Debug)]
pub struct Bootstrap(Option<Child>);

/// How a bootstrap ended, and everything it wrote (stdout, then stderr).
#[derive(Debug)]
pub struct Ran {
    pub status: ExitStatus,
    pub logs: String,
}

impl Bootstrap {
    /// Start `command` with its output captured (the variables are the caller's to set).
    pub fn spawn(mut command: Command) -> std::io::Result<Self> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Ok(Self(Some(command.spawn()?)))
    }

    /// Run `command` until it exits by itself (a bootstrap refusing its configuration); panics
    /// if it is still running after `within`. Blocks: call it off the async runtime.
    pub fn run_to_exit(command: Command, within: Duration) -> Ran {
        let mut running = Self::spawn(command).expect("the bootstrap starts");
        let until = Instant::now() + within;
        let child = running.0.as_mut().expect("running");
        while child.try_wait().expect("the bootstrap's status").is_none() {
            assert!(
                Instant::now() < until,
                "the bootstrap was still running after {within:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        running.stop()
    }

    /// Stop it (if it still runs) and return what it wrote.
    pub fn stop(mut self) -> Ran {
        let mut child = self.0.take().expect("stopped once");
        let _ = child.kill();
        let out = child.wait_with_output().expect("the bootstrap's output");
        Ran {
            status: out.status,
            logs: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
}

impl Drop for Bootstrap {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
