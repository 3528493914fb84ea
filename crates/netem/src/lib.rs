//! artq netem (under construction).
