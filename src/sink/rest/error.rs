//! The REST API's errors: each one is an HTTP status and Connect's error body
//! (`{"error_code": 404, "message": ...}`), and says what to do.

use crate::error::Error;

/// Why a REST call failed; [`status`](Self::status) is its HTTP status code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RestError {
    /// No connector of that name (404).
    #[error("Connector {name} not found; GET /connectors lists the connectors there are")]
    NotFound {
        /// The name asked for.
        name: String,
    },
    /// No task of that id in the connector (404).
    #[error("Task {name}-{id} not found; GET /connectors/{name}/status lists its tasks")]
    NoTask {
        /// The connector.
        name: String,
        /// The task id asked for.
        id: usize,
    },
    /// `POST /connectors` with a name that exists (409).
    #[error("Connector {name} already exists; change it with PUT /connectors/{name}/config, or DELETE it first")]
    Conflict {
        /// The name given.
        name: String,
    },
    /// A configuration the runtime refuses, or a body that is not one (400).
    #[error("{message}")]
    BadRequest {
        /// What is wrong and how to fix it.
        message: String,
    },
    /// No such path, or no such method on it (404 / 405).
    #[error("HTTP {status} {message}")]
    NoRoute {
        /// 404 or 405.
        status: u16,
        /// `Not Found` or `Method Not Allowed`, as Connect's answer says.
        message: &'static str,
    },
    /// The connector configurations could not be written to the worker's store (500): the
    /// change is not kept across a restart.
    #[error("storing connector configurations in {path}: {reason}; check the worker's config.storage.file.filename")]
    Store {
        /// The file.
        path: String,
        /// The IO error.
        reason: String,
    },
    /// Distributed mode: the change could not be written to the config topic, or this worker
    /// did not read it back in time (500). The change may still reach the workers.
    #[error("the config topic {topic}: {reason}; check that the cluster is reachable and the worker's config.storage.topic, then GET the connector to see whether the change arrived")]
    ConfigTopic {
        /// The topic.
        topic: String,
        /// What failed.
        reason: String,
    },
}

impl RestError {
    /// The HTTP status code.
    pub fn status(&self) -> u16 {
        match self {
            RestError::NotFound { .. } | RestError::NoTask { .. } => 404,
            RestError::Conflict { .. } => 409,
            RestError::BadRequest { .. } => 400,
            RestError::NoRoute { status, .. } => *status,
            RestError::Store { .. } | RestError::ConfigTopic { .. } => 500,
        }
    }

    /// Connect's error body.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({"error_code": self.status(), "message": self.to_string()})
    }

    /// A configuration the runtime refused, in the words of Connect's 400 answer.
    pub(crate) fn invalid_config(class: &str, e: &Error) -> RestError {
        let what = match e {
            Error::Config { key, message } => format!("{key}: {message}"),
            e => e.to_string(),
        };
        RestError::BadRequest {
            message: format!(
                "Connector configuration is invalid and contains the following 1 error(s):\n{what}\n\
                 You can also find the above list of errors at the endpoint `/connector-plugins/{class}/config/validate`"
            ),
        }
    }
}
