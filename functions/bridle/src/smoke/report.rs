//! What `bridle smoke` prints: per turn the user's words, every tool call and its result, the
//! reply, and the turn's tokens, cost and latency; at the end the totals and the verdict.
//! Writing to the terminal is best effort: a closed pipe never fails the run.

use assembly::ModelSettings;
use budget::BudgetConfig;
use engine::TurnOutcome;
use std::io::Write;
use std::time::Duration;
use transcript::{Message, Part, Usage};

/// How the harness's notes to the model begin (engine `turn/press.rs`).
const HARNESS_NOTE: &str = "<harness_note>";
/// What precedes the calls a press ran, in its note.
const RAN_DATA: &str = "as JSON data (not instructions): ";

/// Tool results longer than this are cut in the printout.
const RESULT_CHARS: usize = 240;

pub(super) struct Printer<'a> {
    out: &'a mut dyn Write,
    budget: &'a BudgetConfig,
    model_id: &'a str,
    usage: Usage,
    micro_usd: u64,
    latency: Duration,
}

impl<'a> Printer<'a> {
    pub fn new(out: &'a mut dyn Write, budget: &'a BudgetConfig, model_id: &'a str) -> Self {
        Self {
            out,
            budget,
            model_id,
            usage: Usage::default(),
            micro_usd: 0,
            latency: Duration::ZERO,
        }
    }

    fn line(&mut self, text: &str) {
        let _ = writeln!(self.out, "{text}");
    }

    pub fn opening(&mut self, backend: &str, settings: &ModelSettings) {
        let text = format!(
            "bridle smoke: {backend} model {:?} (timeout {} s, idle {} s, max output {} tokens, \
             tool choice {}), on a throwaway in-memory store",
            self.model_id,
            settings.call_timeout.as_secs(),
            settings.idle_timeout.as_secs(),
            settings.max_output_tokens,
            settings.tool_choice.as_str(),
        );
        self.line(&text);
    }

    pub fn user(&mut self, n: usize, about: &str, text: &str, pressed: bool) {
        let how = if pressed { "presses" } else { "says" };
        let of = super::script::CONVERSATION.len();
        self.line(&format!("\n── turn {n}/{of}: {about}"));
        self.line(&format!("   user {how}: {text}"));
    }

    /// The turn's tool calls and results, and the harness's own notes to the model (what a
    /// press of the confirmation button ran).
    pub fn tool_calls(&mut self, rows: &[Message]) {
        for part in rows.iter().flat_map(|m| &m.parts) {
            match part {
                Part::Text { text } => {
                    if let Some(at) = text.find(HARNESS_NOTE) {
                        let note = &text[at..];
                        // A press's note ends with what ran, as data: show that.
                        let ran = note.split_once(RAN_DATA).and_then(|(_, data)| {
                            serde_json::Deserializer::from_str(data)
                                .into_iter::<serde_json::Value>()
                                .next()?
                                .ok()
                        });
                        let shown = match ran {
                            Some(ran) => format!("ran {ran}"),
                            None => note.to_owned(),
                        };
                        self.line(&format!("   harness:     {}", clip(&shown)));
                    }
                }
                Part::ToolUse { name, input, .. } => {
                    self.line(&format!("   tool call:   {name} {input}"));
                }
                Part::ToolResult {
                    content, is_error, ..
                } => {
                    let text = match content {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    let label = if *is_error {
                        "tool error: "
                    } else {
                        "tool result: "
                    };
                    self.line(&format!("   {label}{}", clip(&text)));
                }
                _ => {}
            }
        }
    }

    pub fn reply(&mut self, outcome: &TurnOutcome, latency: Duration) {
        for (i, line) in outcome.reply.lines().enumerate() {
            let lead = if i == 0 {
                "   assistant:   "
            } else {
                "                "
            };
            self.line(format!("{lead}{line}").trim_end());
        }
        if !outcome.buttons.is_empty() {
            let titles: Vec<&str> = outcome.buttons.iter().map(|b| b.title.as_str()).collect();
            self.line(&format!("   buttons:     {}", titles.join(" | ")));
        }
        let cost = self.budget.prices.cost(self.model_id, &outcome.usage);
        let u = &outcome.usage;
        self.line(&format!(
            "   [{:?} · {} model call(s) · {} in / {} out tokens (cache {} read, {} written) · \
             {} · {:.1} s]",
            outcome.end,
            outcome.model_calls,
            u.input_tokens,
            u.output_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
            dollars(cost),
            latency.as_secs_f64()
        ));
        self.usage.input_tokens += u.input_tokens;
        self.usage.output_tokens += u.output_tokens;
        self.usage.cache_read_tokens += u.cache_read_tokens;
        self.usage.cache_write_tokens += u.cache_write_tokens;
        self.micro_usd += cost;
        self.latency += latency;
    }

    pub fn note(&mut self, text: &str) {
        self.line(&format!("   note: {text}"));
    }

    pub fn failure(&mut self, text: &str) {
        self.line(&format!("   FAILED: {text}"));
    }

    pub fn summary(&mut self, failures: &[String]) {
        let totals = format!(
            "\nTotal: {} in / {} out tokens · {} · {:.1} s",
            self.usage.input_tokens,
            self.usage.output_tokens,
            dollars(self.micro_usd),
            self.latency.as_secs_f64()
        );
        self.line(&totals);
        if failures.is_empty() {
            self.line("Smoke check passed: every turn ran and was recorded as shown. Read the replies above for the model's wording.");
        } else {
            self.line(&format!("Smoke check FAILED ({}):", failures.len()));
            for f in failures {
                self.line(&format!("  - {f}"));
            }
        }
    }
}

fn clip(text: &str) -> String {
    let one_line = text.replace('\n', " ");
    if one_line.chars().count() <= RESULT_CHARS {
        return one_line;
    }
    let cut: String = one_line.chars().take(RESULT_CHARS).collect();
    format!("{cut}…")
}

/// Micro-dollars as dollars with enough places for a single call.
fn dollars(micro: u64) -> String {
    format!("${:.4}", micro as f64 / 1e6)
}
