//! Integration tests of the admission webhook, as one test binary (one link instead of one
//! per file): [`webhook`] sends AdmissionReview fixtures to the router in process,
//! [`apiserver`] has the real kube-apiserver call it over HTTPS, [`resize`] decides claim
//! resizes against objects in the real kube-apiserver.

mod apiserver;
mod resize;
mod webhook;
