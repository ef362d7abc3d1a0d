//! Caches: virtually addressed caches and their alias policies ([`vac`]).

pub mod vac;
