//! A built bootstrap, running.

use std::process::{Child, Command, Output, Stdio};

/// A bootstrap process; killed when dropped, so a failing test leaves nothing running.
#[derive(Debug)]
pub struct Bootstrap(Option<Child>);

impl Bootstrap {
    /// Start `command` with its output captured (the variables are the caller's to set).
    pub fn spawn(mut command: Command) -> std::io::Result<Self> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Ok(Self(Some(command.spawn()?)))
    }

    /// Stop it and return what it wrote.
    pub fn stop(mut self) -> Output {
        let mut child = self.0.take().expect("stopped once");
        let _ = child.kill();
        child.wait_with_output().expect("the bootstrap's output")
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
