//! The registry's one error type and its mapping to Confluent's answer:
//! an HTTP status, an `error_code` and a message. Every operation of the
//! core returns [`RegistryError`]; only [`RegistryError::status`] and
//! [`RegistryError::code`] know the numbers (Confluent's `Errors.java`).

/// What went wrong, in the registry's terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum RegistryError {
    #[error("Subject '{0}' not found.")]
    SubjectNotFound(String),
    #[error("Version {0} not found.")]
    VersionNotFound(String),
    #[error("Schema {0} not found")]
    SchemaNotFound(i32),
    #[error("Schema not found")]
    SchemaNotFoundUnder,
    #[error("Subject '{0}' was soft deleted.Set permanent=true to delete permanently")]
    SubjectSoftDeleted(String),
    #[error("Subject '{0}' was not deleted first before being permanently deleted")]
    SubjectNotSoftDeleted(String),
    #[error("Subject '{0}' Version {1} was soft deleted.Set permanent=true to delete permanently")]
    VersionSoftDeleted(String, i32),
    #[error("Subject '{0}' Version {1} was not deleted first before being permanently deleted")]
    VersionNotSoftDeleted(String, i32),
    #[error("Subject '{0}' does not have subject-level compatibility configured")]
    CompatibilityNotConfigured(String),
    #[error("Subject '{0}' does not have subject-level mode configured")]
    ModeNotConfigured(String),
    /// The message is Confluent's: "Schema being registered is incompatible
    /// with an earlier schema for subject ..., details: [...]".
    #[error("{0}")]
    Incompatible(String),
    #[error("{0}")]
    InvalidSchema(String),
    #[error("The specified version '{0}' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"")]
    InvalidVersion(String),
    #[error("Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive")]
    InvalidCompatibility,
    #[error("Invalid mode. Valid values are READWRITE, READONLY and IMPORT.")]
    InvalidMode,
    /// No valid credentials where the registry requires them.
    #[error("Unauthorized")]
    Unauthenticated,
    /// The authorizer denied the operation; the message says which.
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotPermitted(String),
    #[error("One or more references exist to the schema {{magic=1,keytype=SCHEMA,subject={0},version={1}}}.")]
    ReferenceExists(String, i32),
    #[error("{0}")]
    IdDoesNotMatch(String),
    #[error("The specified subject '{0}' is not a valid.")]
    InvalidSubject(String),
    #[error("Register operation failed because schema is too large")]
    SchemaTooLarge,
    /// No such resource (a path that names none, such as a schema id that
    /// is no number): Jersey's plain 404.
    #[error("HTTP 404 Not Found")]
    NoSuchResource,
    /// The request itself is malformed (not JSON, a field of the wrong type).
    #[error("{0}")]
    BadRequest(String),
    /// `schemas.json` could not be written: nothing was changed.
    #[error("Register schema operation failed while writing to the store: {0}")]
    Store(String),
}

impl RegistryError {
    /// The HTTP status of the answer.
    pub fn status(&self) -> u16 {
        use RegistryError::*;
        match self {
            SubjectNotFound(_)
            | VersionNotFound(_)
            | SchemaNotFound(_)
            | SchemaNotFoundUnder
            | SubjectSoftDeleted(_)
            | SubjectNotSoftDeleted(_)
            | VersionSoftDeleted(..)
            | VersionNotSoftDeleted(..)
            | CompatibilityNotConfigured(_)
            | ModeNotConfigured(_)
            | NoSuchResource => 404,
            Incompatible(_) => 409,
            Unauthenticated => 401,
            Forbidden(_) => 403,
            SchemaTooLarge => 413,
            BadRequest(_) => 400,
            Store(_) => 500,
            InvalidSchema(_) | InvalidVersion(_) | InvalidCompatibility | InvalidMode
            | NotPermitted(_) | ReferenceExists(..) | IdDoesNotMatch(_) | InvalidSubject(_) => 422,
        }
    }

    /// Confluent's `error_code`.
    pub fn code(&self) -> u32 {
        use RegistryError::*;
        match self {
            SubjectNotFound(_) => 40401,
            VersionNotFound(_) => 40402,
            SchemaNotFound(_) | SchemaNotFoundUnder => 40403,
            SubjectSoftDeleted(_) => 40404,
            SubjectNotSoftDeleted(_) => 40405,
            VersionSoftDeleted(..) => 40406,
            VersionNotSoftDeleted(..) => 40407,
            CompatibilityNotConfigured(_) => 40408,
            ModeNotConfigured(_) => 40409,
            NoSuchResource => 404,
            // Confluent's long-standing code (its newest releases say 40901).
            Incompatible(_) => 409,
            InvalidSchema(_) => 42201,
            InvalidVersion(_) => 42202,
            InvalidCompatibility => 42203,
            InvalidMode => 42204,
            // Confluent's security plugin: 40101 unauthenticated, 40301
            // denied by the authorizer.
            Unauthenticated => 40101,
            Forbidden(_) => 40301,
            NotPermitted(_) => 42205,
            ReferenceExists(..) => 42206,
            IdDoesNotMatch(_) => 42207,
            InvalidSubject(_) => 42208,
            SchemaTooLarge => 42209,
            // Confluent's REST layer answers a body it cannot parse with
            // HTTP 400 and error_code 400.
            BadRequest(_) => 400,
            Store(_) => 50001,
        }
    }
}

pub type Result<T, E = RegistryError> = std::result::Result<T, E>;
