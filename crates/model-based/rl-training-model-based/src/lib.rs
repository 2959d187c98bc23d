//! The model-based family: the pieces a world-model agent is built from, shared by the
//! family's algorithms (DreamerV3 first, `rl-training-dreamerv3`).
//!
//! - [`batch`]: replayed sequences (`B` windows of `T` steps, time-major);
//! - [`twohot`]: symlog / symexp and the two-hot encoding over symlog-spaced bins that
//!   DreamerV3's reward and value heads predict;
//! - [`categorical`]: the stochastic latents — groups of categoricals with 1% unimix,
//!   straight-through samples, KL with free bits;
//! - [`returns`]: λ-returns over an imagined trajectory and the percentile return scale;
//! - [`nets`]: DreamerV3's dense block (Linear → LayerNorm → SiLU), its initializers, and
//!   the GRU cell whose three gates are one product per step;
//! - [`conv`]: the image encoder and decoder (64×64 frames, stride-2 convolutions);
//! - [`rssm`]: the recurrent state-space model (sequence model, prior, posterior) that
//!   observes replayed sequences and imagines ahead;
//! - [`replay`]: the sequence replay (each env's steps in a ring, windows of `T` rows);
//! - [`sizes`]: RLlib's `model_size` table (nano … XL).
//!
//! Every random draw comes from an [`rl_training_core::Rng`] the caller owns.
#![warn(missing_docs)]

pub mod batch;
pub mod categorical;
pub mod conv;
pub mod nets;
pub mod replay;
pub mod returns;
pub mod rssm;
pub mod sizes;
pub mod twohot;

pub use batch::SequenceBatch;
pub use categorical::{KlTerms, kl_terms, straight_through_sample, unimix};
pub use conv::{ConvDecoder, ConvEncoder, ObsShape};
pub use nets::{DenseStack, NormGru};
pub use replay::{SequenceReplay, StepRow};
pub use returns::{ReturnScale, lambda_returns};
pub use rssm::{Rssm, RssmState};
pub use sizes::{ModelDims, ModelSize};
pub use twohot::{TwoHot, symexp, symlog};
