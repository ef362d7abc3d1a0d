//! Inouye et al.'s measurements re-run on the model.
