//! artq transport (under construction).
