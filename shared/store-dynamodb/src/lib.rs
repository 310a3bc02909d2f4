//! The DynamoDB storage adapter: every Bridle store port on ONE DynamoDB table, through the real
//! `aws-sdk-dynamodb` client. The worker and webhook Lambdas use it; tests run it against
//! `moto_server`.
//!
//! Depends on the `store` ports, `transcript` and `aws-sdk-dynamodb` only. Never on the engine,
//! a backend or Lambda. The caller builds the [`Client`] (region, credentials, timeouts: every
//! outside call needs a deadline, so give it a `TimeoutConfig`) and hands it in.
//!
//! # The table
//!
//! Key `pk` (S, hash) + `sk` (S, range); on-demand billing; TTL on `ttl` (epoch seconds).
//! [`create_table`] makes exactly this; the infrastructure templates must declare the same.
//!
//! | record | `pk` | `sk` | other attributes |
//! |---|---|---|---|
//! | conversation | `CONV#<id>` | `META` | one per field; `gsi1pk = USER#<user>`, `gsi1sk = <created>#<id>` |
//! | message | `CONV#<id>` | `MSG#<position>` | `segment`, `position`, `lsi1sk = MSG#<segment>#<position>`, `body` |
//! | visible entry | `CONV#<id>` | `SEEN#<position>` | `position`, `body` |
//! | body continuation | as its head | head's `sk` + `#PART#<n>` | `chunk = n`, `body`, (`lsi1sk` + `#PART#<n>`) |
//! | job claim | `JOB#<job key>` | `CLAIM` | `status`, `expires_at_ms`, `attempt`, `keep_until_ms`, `ttl`, `reply_sent` (what a released attempt sent) |
//! | a tool call's result | `CONV#<id>` | `TOOL#<asked-at position, 20 digits>#<call id>` | `call_id`, `body` (the result part as JSON) |
//! | conversation lease | `CONV#<id>` | `LEASE` | `holder`, `expires_at_ms`, `ttl`; also a web user's reply-stream slot (`CONV#streams:<user>#<k>`) |
//! | web session | `SESSION#<sha-256 of its secret>` | `SESSION` | `user_id`, `csrf`, `created_at_ms`, `expires_at_ms`, `ttl` |
//! | verified sign-in | `LOGIN#<state>` | `LOGIN` | `keep_until_ms`, `ttl` |
//! | link code | `LINK#<code>` | `LINK` | `user_id`, `expires_at_ms`, `ttl`, `used_at_ms` and `used_by` once redeemed (`used_by` from the start for a code made for one account) |
//! | bound account | `IDENT#<channel>#<external id>` | `IDENT` | `user_id`, `bound_at_ms`, `channel`, `external_id`; `gsi1pk = IDENTS`, `gsi1sk = <user>#<channel>#<external id>` |
//! | owned record | `REC#<kind>#<id>` | `REC` | `kind`, `rid`, `owner`, `body` (canonical JSON) |
//! | owner's listing entry | `OWNER#<owner>#<kind>` | `REC#<id>` | the record's attributes, written in the record's transaction |
//! | audit head | `AUDIT#<user>` | `HEAD` | `seq` (the last row's number), `stack_from` (the first row written with a stack entry) |
//! | audit row | `AUDIT#<user>` | `ACT#<seq>` | `action_id`, `actor`, `by_user`, `at_ms`, `changes` (JSON), `reverts`, `undone_by`, `conversation` |
//! | undo stack entry | `AUDIT#<user>` | `STACK#<length>:<conversation>#<seq>` (`STACK#-#<seq>` outside any) | `action_id`, `seq`; one per row on the stack, deleted when undone |
//! | action index | `AUDIT#<user>` | `AIDX#<action id>` | `seqs` (number set: the action's rows; an undo takes out those it marks, so a `weight` with no `seqs` is an action undone whole), `weight`, `undo_bytes`, `last` (map: record → bytes of its last value), `row_bytes`, `counted_weight` (the weight the count was kept at) |
//! | pending confirmation | `CONV#<id>` | `PENDING#<hash>` | `created_on_action`, `description`, `expires_at_ms`, `ttl` |
//! | active record | `CONV#<id>` | `ACTIVE#<kind>` | `rid` |
//! | account | `USER#<user>` | `ACCOUNT` | `user_id`, `status`, `display_name`, `time_zone`, `email`, `roles`, `created_at_ms`; `gsi1pk = ACCOUNTS`, `gsi1sk = <created>#<user>` |
//! | e-mail guard | `EMAIL#<address>` | `EMAIL` | `user_id` (written in the account's transaction, `attribute_not_exists`) |
//! | MCP token | `TOKEN#<id>` | `TOKEN` | `token_id`, `hash` (SHA-256 of the token), `user_id`, `name`, `scope`, `created_at_ms`, `expires_at_ms`, `last_used_ms`, `revoked_at_ms`; `gsi1pk = TOKENS#<user>`, `gsi1sk = <created>#<id>` |
//! | MCP token's hash | `TOKENHASH#<hash>` | `TOKENHASH` | `token_id` (written in the token's transaction, `attribute_not_exists`) |
//! | budget bucket | `BUDGET#<scope>#<window>#<start>` | `BUCKET` | `used`, `scope`, `win`, `start_ms`, `ttl`; `gsi1pk = BUDGETS#<window>#<start>`, `gsi1sk = <scope>` |
//!
//! Numbers in keys are zero-padded so string order is numeric order: positions to 20 digits
//! (all of `u64`), segments to 10 (all of `u32`). `created` is the creation time in ms with the
//! sign bit flipped (`i64` → `u64`, order kept, negatives included), padded to 20 digits.
//!
//! Two indexes:
//! - `gsi1` (global; `gsi1pk` hash, `gsi1sk` range, all attributes): `conversations_of` queries
//!   `USER#<user>` backwards, which is newest first with ties by id descending. Global indexes
//!   are eventually consistent: a conversation created a moment ago may be missing from the list.
//! - `gsi1` also lists every account (`ACCOUNTS`, by creation time then user id, for
//!   `accounts_page`) and every bound channel account (`IDENTS`, by user; a user's are the
//!   `<user>#` prefix, filtered on `user_id` since user ids may hold `#`). Both are single
//!   partitions: accounts and links change rarely. Items written before these entries existed
//!   are listed once written again.
//! - `lsi1` (local; `pk` hash, `lsi1sk` range, all attributes): `messages(conversation, segment)`
//!   queries `MSG#<segment>#` in it, reading only that segment, strongly consistent.
//!
//! Why messages are keyed by position alone and reached by segment through `lsi1`: positions
//! are unique per conversation across segments, so `MSG#<position>` makes the one conditional
//! `PutItem` (`attribute_not_exists(pk)`) the append-only guard for every segment at once, and
//! `next_position` is one backwards `Query` with `Limit = 1`. The DESIGN sketch
//! `MSG#<segment>#<position>` as the table key would need a second guard item per position and a
//! transaction for every append; a filter on `segment` over the table key would read every old
//! segment on every turn, so cost would grow with the age of the conversation. The local index
//! reads exactly one segment, stays strongly consistent, and costs one extra index write per
//! message. The price: a local index caps each conversation's items at 10 GB, and it must exist
//! when the table is created.
//!
//! # Records, audit and undo
//!
//! A commit is one `TransactWriteItems`: a conditional `Put` or `Delete` per record change
//! (`attribute_not_exists(pk)` for a create; `body = :before AND owner = :owner` otherwise,
//! bodies being canonical JSON), an `Update` of the user's audit head from the sequence number
//! read just before (`seq = :prev`, or `attribute_not_exists` for the first row), and the
//! audit row `ACT#<seq + 1>`. The head makes the user's rows a gap-free sequence in commit
//! order; when a concurrent commit of the same user moved it, the transaction is cancelled on
//! the head alone and is tried again (a few times) with the new number. A cancellation on a
//! record's condition is `Conflict`. A row on the user's undo stack (theirs, not an undo) also
//! writes, in the same transaction, its stack entry (by conversation) and its seq into its
//! action's index. Undo finds the top of the stack in scope (a conversation's newest entry;
//! anywhere, the log newest first in growing pages until a row on the stack), reads the top
//! action's rows through its index (a `GetItem` and a consistent `BatchGetItem`), picks the rows
//! to revert (`store::rows_to_undo`) and writes, in one transaction, the reverting changes (each
//! conditioned on the record still holding what the action left), `undone_by` on each row
//! (conditioned on it being unset), the removal of their stack entries, the undo's own row
//! (its actor and conversation) and the removal of the action's byte count from its index. So a conversation's undo reads a handful of items however long
//! the log (`tests/tests/undo_reads.rs`: 5 with 3 or with 150 earlier actions, where the filtered
//! query over the whole partition read 8 and 204); an undo anywhere reads the log down to the
//! newest row still on the stack (after k undos in a row, about 2k rows). Rows from before the
//! entries existed (below the head's `stack_from`) are undone from a filtered query over that
//! part of the log, which no longer grows; an action whose rows straddle `stack_from` is undone
//! for its newer rows first. A transaction holds at most 100 items: a commit writes two per
//! change (the record and its listing entry) and four more (head, row, entry, index), so one
//! commit changes at most 47 records with a receipt; an undo writes two per record it reverts,
//! one per row and four more, so the index also adds up its action's weight, and keeps what its
//! undo would hold in bytes (`store::UndoSize`: an undo's row is one item, at most 400 KB). A
//! commit on the stack reads the index with the audit head (a `BatchGetItem`; the index's
//! conditions, not the read, make the two agree), refuses itself past
//! `store::MAX_ACTION_WEIGHT`, `store::MAX_ROW_BYTES` or `store::MAX_UNDO_WRITE_BYTES`
//! (`TooLarge`, nothing written) and writes the index back on the condition that it still holds the weight and bytes it read
//! (`action_index.rs`). However a model chains its calls, its turn stays small enough to undo
//! in one transaction (before, 34 commits to as many records made a turn that no undo could
//! take back, and that blocked every undo behind it; and an action's records past about
//! 195 KB made an undo row DynamoDB refuses). The undone rows' entries go in when they fit,
//! else right after it (a crash in between leaves stale entries, which the next undo skips).
//! Rows an older version writes after `stack_from` was set (both running during a deploy) have
//! no entry: a conversation's undo never sees them, and an undo anywhere that meets one reads
//! the whole log for it.
//!
//! A user's records are listed from the base table: every change also writes the record's
//! entry in its owner's listing (`OWNER#<owner>#<kind>` / `REC#<id>`, a copy of the record's
//! attributes) in the same transaction, so `records_of` is one strongly consistent `Query`,
//! in id order — a record written a moment ago is listed (a global index would be eventually
//! consistent: the model could create an event and not find it in the list it asks for next).
//! Record kinds and channel names never contain `#`.
//!
//! # Bodies and the 400 KB item limit
//!
//! Messages and visible entries store the serde JSON of the whole value in `body`, so reads
//! give back what was written, byte for byte. A body over 350,000 bytes is cut (on character
//! boundaries) into chunks: the head item holds the first chunk and `chunks = n`, continuation
//! items `…#PART#001`, `…#PART#002`, … hold the rest, and all of them go in one
//! `TransactWriteItems` whose head `Put` carries the `attribute_not_exists` condition, so a
//! record is written whole or not at all. Reads put the chunks back together. A transaction
//! carries at most 4 MB, so a body is limited to 10 chunks (3.5 MB); a bigger one is refused
//! as [`StoreError::Unavailable`] with a source that says so.
//!
//! # Time to live
//!
//! Job claims carry a `ttl`: a finished one its `keep_until_ms`, rounded up to seconds, a
//! running one `store::KEEP_ABANDONED_MS` past its expiry (a job dead-lettered or given up
//! leaves one that nobody finishes; before, it stayed forever). So do
//! link codes (their `expires_at_ms`, rounded up). DynamoDB deletes expired items late (and
//! moto never), so every read treats an item whose `ttl` has passed as absent, the claim's
//! condition admits an expired record, and a link code is judged by its `expires_at_ms` in
//! the conditions that create and redeem it: an expired code redeems nothing whether or not it
//! is still there, and a new code of the same string replaces it. TTL only ever deletes what
//! the conditions already treat as gone. Bound accounts never expire.
//!
//! # Errors
//!
//! A failed condition becomes `Conflict` (create, append), `NotFound` (update) or `None`
//! (redeeming a link code). Everything else the service or the connection reports (throttling,
//! internal errors, timeouts, a missing table) is [`StoreError::Unavailable`] with the SDK
//! error as its source; the SDK has already retried what it retries (a retried transaction is
//! idempotent: the SDK fills in its client request token). A stored body or attribute that does
//! not decode is `Corrupt`.
//!
//! # Tests
//!
//! `tests/` runs the store conformance suite and raw-item checks against `moto_server`, started
//! through `scripts/moto_server_serial.py`: moto does not apply a conditional write atomically
//! under concurrent requests, which DynamoDB does and the suite's races check.

mod accounts;
mod action_index;
mod audit;
mod body;
mod budget;
mod claims;
mod confirmations;
mod conversations;
mod error;
mod identities;
mod item;
mod keys;
mod leases;
mod messages;
mod query;
mod records;
mod retention;
mod sessions;
mod table;
mod tokens;
mod tool_results;
mod transact;
mod turn_writes;
mod undo;
mod visible;

pub use table::create_table;

use aws_sdk_dynamodb::Client;

/// The store ports on one DynamoDB table. Cheap to clone (the client is shared).
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    table: String,
    page_limit: Option<i32>,
}

impl DynamoStore {
    /// The store on `table`, which must have the layout [`create_table`] makes.
    pub fn new(client: Client, table: String) -> Self {
        Self {
            client,
            table,
            page_limit: None,
        }
    }

    /// Cap every `Query` page at `items` items (DynamoDB also ends a page at 1 MB). Reads
    /// follow `LastEvaluatedKey` either way; tests use a small cap to exercise that.
    pub fn with_page_limit(mut self, items: i32) -> Self {
        self.page_limit = Some(items);
        self
    }

    /// The table this store uses.
    pub fn table(&self) -> &str {
        &self.table
    }
}
