//! Integration tests of the aws provider against moto and Amazon's EC2 metadata mock
//! (`hypercloud_testenv::aws`). One test binary (`tests/it/`), one module per former test
//! file; each test first takes its module's group (`hypercloud_testenv::group`), so only tests
//! of one module run at once, as when each file was its own process (`credentials_errors`
//! changes the process's environment).

mod assume_role;
mod credentials_errors;
mod instances;
mod loadbalancer;
mod routes_volumes;
mod support;
mod volumes;
