//! The bounded export queue: a span that ends is handed to the queue without waiting; a thread
//! of its own sends batches to the exporter. A full queue drops the span and counts it, so a
//! slow or absent collector never slows or fails a turn.

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter, SpanProcessor};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Spans sent in one export call at most.
const MAX_BATCH: usize = 512;
/// Flushes that may wait in the channel besides the spans.
const FLUSH_SLOTS: usize = 16;
/// A batch that is not full goes out after this long.
const BATCH_DELAY: Duration = Duration::from_millis(500);

enum Work {
    Span(Box<SpanData>),
    /// Export everything queued before this, then answer.
    Flush(Sender<()>),
}

/// The handle to the queue and its export thread.
#[derive(Debug, Clone)]
pub struct ExportQueue {
    inner: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    tx: Mutex<Option<SyncSender<Work>>>,
    /// Spans in the channel now; at most `capacity`.
    queued: Arc<AtomicUsize>,
    capacity: usize,
    dropped: AtomicU64,
    failed_exports: Arc<AtomicU64>,
}

impl ExportQueue {
    /// Start the export thread for `exporter`, holding at most `capacity` spans.
    pub fn start<E: SpanExporter + 'static>(
        mut exporter: E,
        resource: &Resource,
        capacity: usize,
    ) -> Self {
        exporter.set_resource(resource);
        // Room for flushes beyond the spans, so a flush finds a slot in a queue full of spans.
        let (tx, rx) = std::sync::mpsc::sync_channel(capacity + FLUSH_SLOTS);
        let failed_exports = Arc::new(AtomicU64::new(0));
        let queued = Arc::new(AtomicUsize::new(0));
        let (failed, taken) = (failed_exports.clone(), queued.clone());
        let spawned = std::thread::Builder::new()
            .name("otel-export".into())
            .spawn(move || export_loop(exporter, rx, failed, taken));
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "the trace export thread did not start; traces are off");
        }
        ExportQueue {
            inner: Arc::new(Shared {
                tx: Mutex::new(Some(tx)),
                queued,
                capacity,
                dropped: AtomicU64::new(0),
                failed_exports,
            }),
        }
    }

    /// The span processor that feeds this queue.
    pub fn processor(&self) -> QueueProcessor {
        QueueProcessor {
            queue: self.clone(),
        }
    }

    /// Spans dropped because the queue was full (or the export thread is gone).
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }

    /// Export calls that failed (a collector down or refusing).
    pub fn failed_exports(&self) -> u64 {
        self.inner.failed_exports.load(Ordering::Relaxed)
    }

    fn sender(&self) -> Option<SyncSender<Work>> {
        self.inner.tx.lock().ok().and_then(|tx| tx.clone())
    }

    fn push(&self, span: SpanData) {
        let queued = &self.inner.queued;
        let (Some(tx), true) = (
            self.sender(),
            queued.load(Ordering::Acquire) < self.inner.capacity,
        ) else {
            self.count_drop();
            return;
        };
        queued.fetch_add(1, Ordering::AcqRel);
        match tx.try_send(Work::Span(Box::new(span))) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                queued.fetch_sub(1, Ordering::AcqRel);
                self.count_drop();
            }
        }
    }

    fn count_drop(&self) {
        let n = self.inner.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        // 1, 10, 100, ...: a full queue says so without a line per span.
        if n.to_string()
            .trim_start_matches('1')
            .bytes()
            .all(|b| b == b'0')
        {
            tracing::warn!(
                dropped = n,
                "the trace export queue is full; spans are dropped"
            );
        }
    }

    /// Export everything queued so far; wait at most `wait` for it.
    pub fn flush(&self, wait: Duration) {
        let Some(tx) = self.sender() else { return };
        let (done, finished) = std::sync::mpsc::channel();
        // Every flush slot taken: other flushes are waiting for the same export.
        if tx.try_send(Work::Flush(done)).is_ok() {
            let _ = finished.recv_timeout(wait);
        }
    }

    fn close(&self) {
        if let Ok(mut tx) = self.inner.tx.lock() {
            tx.take();
        }
    }
}

fn export_loop<E: SpanExporter>(
    exporter: E,
    rx: Receiver<Work>,
    failed: Arc<AtomicU64>,
    queued: Arc<AtomicUsize>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::warn!(error = %e, "the trace export thread has no runtime; traces are off");
            return;
        }
    };
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut oldest: Option<Instant> = None;
    loop {
        let wait = oldest.map_or(BATCH_DELAY, |t| BATCH_DELAY.saturating_sub(t.elapsed()));
        let (flush, closed) = match rx.recv_timeout(wait) {
            Ok(Work::Span(span)) => {
                queued.fetch_sub(1, Ordering::AcqRel);
                batch.push(*span);
                oldest.get_or_insert_with(Instant::now);
                (None, false)
            }
            Ok(Work::Flush(done)) => (Some(done), false),
            Err(RecvTimeoutError::Timeout) => (None, false),
            Err(RecvTimeoutError::Disconnected) => (None, true),
        };
        let due = oldest.is_some_and(|t| t.elapsed() >= BATCH_DELAY);
        if !batch.is_empty() && (batch.len() >= MAX_BATCH || due || flush.is_some() || closed) {
            let spans = std::mem::replace(&mut batch, Vec::with_capacity(MAX_BATCH));
            oldest = None;
            if let Err(e) = runtime.block_on(exporter.export(spans)) {
                let n = failed.fetch_add(1, Ordering::Relaxed) + 1;
                if n == 1 || n.is_multiple_of(100) {
                    tracing::warn!(error = %e, failed_exports = n, "traces could not be exported; the turns are unaffected");
                }
            }
        }
        if let Some(done) = flush {
            let _ = done.send(());
        }
        if closed {
            let _ = exporter.shutdown();
            return;
        }
    }
}

/// Hands ended spans to an [`ExportQueue`].
#[derive(Debug)]
pub struct QueueProcessor {
    queue: ExportQueue,
}

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        if span.span_context.is_sampled() {
            self.queue.push(span);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.queue.flush(Duration::from_secs(5));
        Ok(())
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.queue.flush(timeout);
        self.queue.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{
        SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
    };
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};
    use std::borrow::Cow;
    use std::time::SystemTime;

    /// An exporter that holds every export until `open` is set, and counts what it got.
    #[derive(Debug, Clone, Default)]
    struct Stuck {
        open: Arc<AtomicBool>,
        exported: Arc<AtomicUsize>,
    }

    use std::sync::atomic::AtomicBool;

    impl SpanExporter for Stuck {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            while !self.open.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            self.exported.fetch_add(batch.len(), Ordering::SeqCst);
            Ok(())
        }
    }

    fn span(n: u64) -> SpanData {
        SpanData {
            span_context: SpanContext::new(
                TraceId::from(u128::from(n) + 1),
                SpanId::from(n + 1),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Borrowed("s"),
            start_time: SystemTime::now(),
            end_time: SystemTime::now(),
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        }
    }

    #[test]
    fn a_stuck_collector_never_blocks_a_span_and_the_overflow_is_counted() {
        let exporter = Stuck::default();
        let queue = ExportQueue::start(exporter.clone(), &Resource::builder_empty().build(), 8);
        let processor = queue.processor();
        // The export thread takes a first span and is stuck exporting it.
        processor.on_end(span(0));
        queue.flush(Duration::from_millis(50));
        std::thread::sleep(Duration::from_millis(50));
        let started = Instant::now();
        for n in 1..=100 {
            processor.on_end(span(n));
        }
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "ending spans waited for the collector"
        );
        // The queue holds 8 spans; the rest are counted.
        assert_eq!(queue.dropped(), 100 - 8);
        // A flush against a stuck collector gives up after its wait.
        let flushing = Instant::now();
        queue.flush(Duration::from_millis(100));
        assert!(flushing.elapsed() < Duration::from_secs(2));
        // Once the collector answers, what was kept goes out.
        exporter.open.store(true, Ordering::SeqCst);
        queue.flush(Duration::from_secs(5));
        assert_eq!(exporter.exported.load(Ordering::SeqCst), 1 + 8);
    }

    #[test]
    fn an_unreachable_collector_costs_a_flush_its_wait_and_no_more() {
        // Nothing listens on the port a closed listener had.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(format!("http://127.0.0.1:{port}/v1/traces"))
            .build()
            .unwrap();
        use opentelemetry_otlp::WithExportConfig;
        let queue = ExportQueue::start(exporter, &Resource::builder_empty().build(), 16);
        queue.processor().on_end(span(1));
        let started = Instant::now();
        queue.flush(Duration::from_secs(5));
        assert!(started.elapsed() < Duration::from_secs(5));
        // The refused export is counted once it came back.
        let deadline = Instant::now() + Duration::from_secs(5);
        while queue.failed_exports() == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(queue.failed_exports(), 1);
        assert_eq!(queue.dropped(), 0);
    }
}
