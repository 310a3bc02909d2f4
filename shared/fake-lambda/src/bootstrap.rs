//! A built bootstrap, running.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A bootstrap process; killed when dropped, so a failing test leaves nothing running.
///
/// Its stdout and stderr are drained by a thread each from the start, so a bootstrap that logs
/// more than a pipe holds (64 KB) never blocks on a full pipe while the test waits for it.
#[derive(Debug)]
pub struct Bootstrap {
    child: Option<Child>,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<Vec<u8>>>,
}

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
        let mut child = command.spawn()?;
        let stdout = child.stdout.take().map(drain);
        let stderr = child.stderr.take().map(drain);
        Ok(Self {
            child: Some(child),
            stdout,
            stderr,
        })
    }

    /// Run `command` until it exits by itself (a bootstrap refusing its configuration); panics
    /// if it is still running after `within`. Blocks: call it off the async runtime.
    pub fn run_to_exit(command: Command, within: Duration) -> Ran {
        let mut running = Self::spawn(command).expect("the bootstrap starts");
        let until = Instant::now() + within;
        let child = running.child.as_mut().expect("running");
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
        let mut child = self.child.take().expect("stopped once");
        let _ = child.kill();
        let status = child.wait().expect("the bootstrap's status");
        let stdout = collect(self.stdout.take());
        let stderr = collect(self.stderr.take());
        Ran {
            status,
            logs: format!(
                "{}{}",
                String::from_utf8_lossy(&stdout),
                String::from_utf8_lossy(&stderr)
            ),
        }
    }
}

/// Read `pipe` to its end on a thread of its own.
fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

fn collect(reader: Option<JoinHandle<Vec<u8>>>) -> Vec<u8> {
    reader
        .map(|thread| thread.join().expect("the output reader"))
        .unwrap_or_default()
}

impl Drop for Bootstrap {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that writes far more than a pipe buffer before exiting still exits, and every
    /// byte of what it wrote comes back.
    #[test]
    fn a_chatty_process_is_not_blocked_by_a_full_pipe() {
        let mut command = Command::new("sh");
        command.args([
            "-c",
            "head -c 1000000 /dev/zero | tr '\\0' 'x'; echo; echo done >&2; exit 3",
        ]);
        let ran = Bootstrap::run_to_exit(command, Duration::from_secs(20));
        assert_eq!(ran.status.code(), Some(3));
        assert_eq!(ran.logs.matches('x').count(), 1_000_000);
        assert!(ran.logs.ends_with("done\n"), "stderr comes after stdout");
    }
}
