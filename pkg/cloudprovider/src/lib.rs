//! hypercloud-cloudprovider (work in progress).
