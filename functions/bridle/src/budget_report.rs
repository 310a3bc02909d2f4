//! `bridle budget report`: the finance report from the local SQLite file or a DynamoDB table.

use budget::BudgetConfig;
use budget::report::{Report, render};
use std::path::PathBuf;
use std::sync::Arc;
use store::{BudgetLedger, StoreError};

/// Where the ledger is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerSource {
    /// The local server's SQLite file.
    Sqlite(PathBuf),
    /// A DynamoDB table (region, credentials and endpoint from the standard AWS environment).
    DynamoDb { table: String },
}

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Csv,
}

/// What [`report`] needs.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    pub format: Format,
    /// Conversations listed, most expensive first.
    pub top: usize,
    pub now_ms: i64,
}

/// The ledger of `source`. DynamoDB calls get deadlines (connect 2 s, attempt 5 s,
/// operation 15 s).
pub async fn open_ledger(source: &LedgerSource) -> Result<Arc<dyn BudgetLedger>, StoreError> {
    Ok(match source {
        LedgerSource::Sqlite(path) => {
            if !path.exists() {
                return Err(StoreError::NotFound {
                    what: format!("database file {}", path.display()),
                });
            }
            Arc::new(store_sqlite::SqliteStore::open(path)?)
        }
        LedgerSource::DynamoDb { table } => Arc::new(store_dynamodb::DynamoStore::new(
            crate::admin_cli::dynamodb_client().await,
            table.clone(),
        )),
    })
}

/// Build the report and print it in the chosen format.
pub async fn report(
    ledger: &dyn BudgetLedger,
    config: &BudgetConfig,
    options: &ReportOptions,
) -> Result<String, StoreError> {
    let report = Report::build(ledger, config, options.now_ms, options.top).await?;
    Ok(match options.format {
        Format::Table => render::to_table(&report),
        Format::Json => render::to_json(&report) + "\n",
        Format::Csv => render::to_csv(&report),
    })
}
