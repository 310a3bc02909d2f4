//! Which attachments a model reads as documents, by MIME type (lower case, no parameters):
//! what a backend sends as a document (Bedrock's Converse document formats), and so what a
//! budget estimates by its size. Any other attachment but an image goes to the model as a line
//! naming it.

/// Documents read as they are, as text: Converse's `txt`, `csv`, `html` and `md`.
pub const TEXT_DOCUMENTS: &[&str] = &["text/plain", "text/csv", "text/html", "text/markdown"];

/// Documents read by the text in their file: Converse's `pdf`, `doc`, `docx`, `xls`, `xlsx`.
pub const FILE_DOCUMENTS: &[&str] = &[
    "application/pdf",
    "application/msword",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.ms-excel",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
];
