//! The sentences users see when something other than a normal answer happens.
//! Calm, short, never an SDK string.

pub const BACKEND_FAILED: &str =
    "Sorry, something went wrong on my side and I couldn't finish that. Please try again.";
pub const THROTTLED: &str =
    "I'm getting more requests than I can handle right now. Please try again in a minute.";
pub const OVERLOADED: &str =
    "The model is busy or still starting up right now. Please try again in a little while.";
/// The model server refused the connection or could not be found.
pub const UNREACHABLE: &str =
    "I can't reach the model server right now. Please try again in a little while.";
pub const TIMED_OUT: &str =
    "Sorry, that took too long and I had to stop. Please try again in a moment.";
pub const CUT_OFF: &str = "(My answer was cut off because it got too long. Say \"continue\" and I'll pick up from there.)";
pub const DECLINED: &str = "I'm not able to help with that request.";
pub const TOO_LONG: &str = "This conversation has grown too long for me to keep track of. Please start a new conversation.";
pub const MUDDLED: &str =
    "Sorry, I got muddled while working on that. Could you ask again, perhaps in other words?";
pub const CYCLE_LIMIT: &str = "I've taken a lot of steps on this and stopped here so I don't go round in circles. Tell me how you'd like to continue.";
/// A queued message whose turn could not start before the server stopped.
pub const INTERRUPTED: &str =
    "The server is restarting. Your message is saved and will be answered as soon as it is back.";
/// A web chat message whose attempt failed under the server (its store) and that is tried
/// again by itself: the browser looks for the answer and shows it when it is in.
pub const RETRYING: &str = "Something went wrong on my side while answering. Your message is saved and I'm trying again; the answer will show here.";
/// A message whose every attempt failed (it went to the dead letters).
pub const GAVE_UP: &str = "Sorry, I couldn't process that message, even after several tries. Please send it again in a little while.";
/// In the model's view only: a turn found asking for tools when the next one started (its
/// worker died and it was never given up); its calls are answered as not executed.
pub const STOPPED: &str = "Sorry, I stopped working on that message before I had finished it.";
pub const EMPTY: &str = "Sorry, I don't have an answer for that. Could you say a bit more?";
/// What a silent reply shows where no reaction went out.
pub const ACKNOWLEDGED: &str = "👍";
