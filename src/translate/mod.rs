//! Translation between the neutral model and REST: `Call` -> HTTP request, HTTP answer -> `Outcome`.
//! Pure functions over compiled configuration; they never perform I/O themselves.

pub mod answer;
pub mod content;
pub mod doc_schema;
pub mod fastjq;
pub mod lent;
pub mod minted;
pub mod path;
pub mod request;
pub mod response;
pub mod rest;
pub mod summary;
pub mod transform;
pub mod uri;
