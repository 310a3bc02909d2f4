use std::cell::RefCell;
use std::io::Write;
use std::sync::{Arc, Mutex, Once};

thread_local! {
    static CAPTURE: RefCell<Option<Arc<Mutex<Vec<u8>>>>> = const { RefCell::new(None) };
}

/// Captures what is logged on this thread while installed. Tests run on a current-thread
/// runtime, so a whole turn logs here.
///
/// One global subscriber (installed once per test binary) writes each line to the buffer of the
/// thread that logged it. A global subscriber, unlike per-thread defaults, never leaves a
/// callsite's cached interest stale when tests run in parallel.
#[derive(Clone, Default, Debug)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

/// Stops capturing when dropped.
#[derive(Debug)]
pub struct Capturing(());

impl Drop for Capturing {
    fn drop(&mut self) {
        CAPTURE.with(|c| c.borrow_mut().take());
    }
}

struct ThreadWriter;

impl Write for ThreadWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        CAPTURE.with(|c| {
            if let Some(buf) = c.borrow().as_ref() {
                buf.lock().unwrap().extend_from_slice(b);
            }
        });
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Start capturing this thread's log lines.
    pub fn install(&self) -> Capturing {
        static GLOBAL: Once = Once::new();
        GLOBAL.call_once(|| {
            let sub = tracing_subscriber::fmt()
                .with_writer(|| ThreadWriter)
                .with_ansi(false)
                .with_max_level(tracing::Level::DEBUG)
                .finish();
            tracing::subscriber::set_global_default(sub).expect("no other global subscriber");
        });
        let buf = self.0.clone();
        CAPTURE.with(|c| *c.borrow_mut() = Some(buf));
        Capturing(())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
