use super::*;
use crate::Activation;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn config(state_dim: usize, actions: usize) -> DqnConfig {
    DqnConfig {
        state_dim,
        actions,
        hidden: vec![16],
        activation: Activation::Relu,
        gamma: 0.9,
        learning_rate: 0.01,
        optimizer: OptimizerKind::Adam,
        batch_size: 32,
        memory: 1000,
        target_update: 20,
        epsilon: Epsilon {
            start: 0.3,
            factor: 0.7,
            every: 100,
            floor: 0.0,
        },
        double: true,
    }
}

/// A two-state contextual bandit: the right action is the state's index.
fn bandit_transition(rng: &mut ChaCha8Rng) -> Transition {
    let s = rng.gen_range(0..2);
    let a = rng.gen_range(0..2);
    let mut state = vec![0.0; 2];
    state[s] = 1.0;
    Transition {
        state: state.clone(),
        action: a,
        reward: if a == s { 1.0 } else { 0.0 },
        next_state: state,
        done: true,
    }
}

#[test]
fn a_learning_step_lowers_the_loss_on_a_toy_problem() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut agent = Dqn::new(config(2, 2), &mut rng).unwrap();
    assert_eq!(agent.learn(&mut rng).unwrap(), None, "no batch yet");
    for _ in 0..500 {
        agent.remember(bandit_transition(&mut rng)).unwrap();
    }
    let losses: Vec<f32> = (0..400)
        .map(|_| agent.learn(&mut rng).unwrap().unwrap())
        .collect();
    let mean = |l: &[f32]| l.iter().sum::<f32>() / l.len() as f32;
    let (first, last) = (mean(&losses[..20]), mean(&losses[380..]));
    assert!(last < first * 0.2, "loss {first} -> {last}");
    assert_eq!(agent.greedy(&[1.0, 0.0]).unwrap(), 0);
    assert_eq!(agent.greedy(&[0.0, 1.0]).unwrap(), 1);
    let q = agent.q_values(&[1.0, 0.0]).unwrap();
    assert!((q[0] - 1.0).abs() < 0.15 && q[1].abs() < 0.15, "{q:?}");
}

/// A two-step chain: in A, action 0 leads to B for nothing, action 1 ends
/// with 0.2; in B, action 0 ends with 1. With gamma 0.9, Q(A, 0) = 0.9
/// beats 0.2 only through the bootstrapped value of B, so both the plain
/// and the Double DQN targets must carry value back a step (also with
/// RCP's sigmoid network).
#[test]
fn values_are_bootstrapped_through_the_target_network() {
    for (double, activation) in [
        (false, Activation::Relu),
        (true, Activation::Relu),
        (true, Activation::Sigmoid),
    ] {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut agent = Dqn::new(
            DqnConfig {
                double,
                activation,
                ..config(2, 2)
            },
            &mut rng,
        )
        .unwrap();
        let (a, b) = (vec![1.0, 0.0], vec![0.0, 1.0]);
        for _ in 0..300 {
            let t = match (rng.gen_range(0..2), rng.gen_range(0..2)) {
                (0, 0) => (a.clone(), 0, 0.0, b.clone(), false),
                (0, _) => (a.clone(), 1, 0.2, a.clone(), true),
                (_, 0) => (b.clone(), 0, 1.0, b.clone(), true),
                (_, _) => (b.clone(), 1, 0.0, b.clone(), true),
            };
            agent
                .remember(Transition {
                    state: t.0,
                    action: t.1,
                    reward: t.2,
                    next_state: t.3,
                    done: t.4,
                })
                .unwrap();
        }
        for _ in 0..1500 {
            agent.learn(&mut rng).unwrap();
        }
        let q = agent.q_values(&a).unwrap();
        assert!((q[0] - 0.9).abs() < 0.1, "double {double}: Q(A) = {q:?}");
        assert!((q[1] - 0.2).abs() < 0.1, "double {double}: Q(A) = {q:?}");
        assert_eq!(agent.greedy(&a).unwrap(), 0);
    }
}

#[test]
fn the_target_network_syncs_every_interval() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut agent = Dqn::new(
        DqnConfig {
            target_update: 10,
            ..config(2, 2)
        },
        &mut rng,
    )
    .unwrap();
    let probe = [1.0, 0.0];
    assert!(agent.target_matches(&probe).unwrap(), "synced at creation");
    for _ in 0..100 {
        agent.remember(bandit_transition(&mut rng)).unwrap();
    }
    for step in 1..=20u64 {
        agent.learn(&mut rng).unwrap();
        assert_eq!(
            agent.target_matches(&probe).unwrap(),
            step % 10 == 0,
            "after learning step {step}"
        );
    }
}

#[test]
fn a_seed_makes_training_repeatable() {
    let train = |seed| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut agent = Dqn::new(config(2, 2), &mut rng).unwrap();
        let mut actions = Vec::new();
        for _ in 0..200 {
            let t = bandit_transition(&mut rng);
            actions.push(agent.act(&t.state, &mut rng).unwrap());
            agent.remember(t).unwrap();
            agent.learn(&mut rng).unwrap();
        }
        (actions, agent.q_values(&[1.0, 0.0]).unwrap())
    };
    assert_eq!(train(9), train(9));
    assert_ne!(train(9), train(10));
}

#[test]
fn exploration_decays_on_schedule() {
    let e = Epsilon {
        start: 0.3,
        factor: 0.7,
        every: 100,
        floor: 0.01,
    };
    assert_eq!(e.at(0), 0.3);
    assert_eq!(e.at(99), 0.3);
    assert!((e.at(100) - 0.21).abs() < 1e-12);
    assert!((e.at(250) - 0.147).abs() < 1e-12);
    assert_eq!(e.at(u64::MAX), 0.01);
    assert_eq!(Epsilon::GREEDY.at(5), 0.0);
}

#[test]
fn models_round_trip_through_files_and_mismatches_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut agent = Dqn::new(config(3, 2), &mut rng).unwrap();
    for _ in 0..64 {
        agent
            .remember(Transition {
                state: vec![0.5, 0.1, 0.2],
                action: 1,
                reward: 0.7,
                next_state: vec![0.1, 0.2, 0.3],
                done: false,
            })
            .unwrap();
    }
    agent.learn(&mut rng).unwrap();
    agent.save(&path).unwrap();
    let probe = [0.3, -0.2, 0.9];
    let mut fresh = Dqn::new(config(3, 2), &mut ChaCha8Rng::seed_from_u64(2)).unwrap();
    assert_ne!(
        fresh.q_values(&probe).unwrap(),
        agent.q_values(&probe).unwrap()
    );
    assert_eq!(fresh.load(&path).unwrap(), None, "saved without a note");
    assert_eq!(
        fresh.q_values(&probe).unwrap(),
        agent.q_values(&probe).unwrap()
    );
    assert!(fresh.target_matches(&probe).unwrap());

    // A note travels with the model, and writing it twice gives the same
    // bytes (one metadata key: no map order to vary).
    let noted = dir.path().join("noted.safetensors");
    agent
        .save_with_note(&noted, Some("art-dqn:per=loss"))
        .unwrap();
    assert_eq!(
        fresh.load(&noted).unwrap().as_deref(),
        Some("art-dqn:per=loss")
    );
    assert_eq!(
        crate::model_note(&noted).unwrap().as_deref(),
        Some("art-dqn:per=loss")
    );
    let bytes = std::fs::read(&noted).unwrap();
    agent
        .save_with_note(&noted, Some("art-dqn:per=loss"))
        .unwrap();
    assert_eq!(bytes, std::fs::read(&noted).unwrap());
    // Without a note, the file is what candle itself writes.
    let plain = dir.path().join("plain.safetensors");
    candle_core::safetensors::save(&agent_tensors(&agent), &plain).unwrap();
    assert_eq!(
        std::fs::read(&plain).unwrap(),
        std::fs::read(&path).unwrap()
    );
    assert!(crate::model_note(&dir.path().join("absent")).is_err());

    let err = |r: Result<Option<String>, LearnError>| r.unwrap_err().to_string();
    let mut other = Dqn::new(
        DqnConfig {
            hidden: vec![8],
            ..config(3, 2)
        },
        &mut rng,
    )
    .unwrap();
    let e = err(other.load(&path));
    assert!(
        e.contains("model.safetensors") && e.contains("layer0.") && e.contains("[8]"),
        "{e}"
    );
    let mut deeper = Dqn::new(
        DqnConfig {
            hidden: vec![16, 16],
            ..config(3, 2)
        },
        &mut rng,
    )
    .unwrap();
    let e = err(deeper.load(&path));
    assert!(e.contains("missing"), "{e}");
    let e = err(fresh.load(&dir.path().join("absent")));
    assert!(e.contains("absent"), "{e}");
    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"this is not a model").unwrap();
    let e = err(fresh.load(&junk));
    assert!(e.contains("not a safetensors"), "{e}");
    let huge = dir.path().join("huge");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(MAX_MODEL_FILE_BYTES + 1)
        .unwrap();
    let e = err(fresh.load(&huge));
    assert!(e.contains("more than"), "{e}");
}

/// The online network's tensors, as candle's own writer takes them.
fn agent_tensors(agent: &Dqn) -> std::collections::HashMap<String, candle_core::Tensor> {
    agent.online.named_tensors()
}

#[test]
fn bad_configurations_and_inputs_are_errors() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for bad in [
        DqnConfig {
            gamma: 1.5,
            ..config(2, 2)
        },
        DqnConfig {
            learning_rate: 0.0,
            ..config(2, 2)
        },
        DqnConfig {
            batch_size: 0,
            ..config(2, 2)
        },
        DqnConfig {
            memory: 8,
            ..config(2, 2)
        },
        DqnConfig {
            target_update: 0,
            ..config(2, 2)
        },
        DqnConfig {
            actions: 0,
            ..config(2, 2)
        },
        DqnConfig {
            hidden: vec![0],
            ..config(2, 2)
        },
    ] {
        assert!(Dqn::new(bad.clone(), &mut rng).is_err(), "{bad:?}");
    }
    let mut agent = Dqn::new(config(2, 3), &mut rng).unwrap();
    assert!(agent.q_values(&[1.0]).is_err());
    assert!(agent.q_values(&[1.0, f32::NAN]).is_err());
    let t = Transition {
        state: vec![0.0, 0.0],
        action: 3,
        reward: 0.0,
        next_state: vec![0.0, 0.0],
        done: true,
    };
    assert!(agent.remember(t).is_err());
}

#[test]
fn weights_copy_between_agents_of_one_shape_only() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let a = Dqn::new(config(3, 2), &mut rng).unwrap();
    let mut b = Dqn::new(config(3, 2), &mut rng).unwrap();
    let probe = [0.1, 0.2, 0.3];
    assert_ne!(a.q_values(&probe).unwrap(), b.q_values(&probe).unwrap());
    b.copy_weights(&a).unwrap();
    assert_eq!(a.q_values(&probe).unwrap(), b.q_values(&probe).unwrap());
    assert!(b.target_matches(&probe).unwrap());
    let mut other = Dqn::new(config(3, 3), &mut rng).unwrap();
    let e = other.copy_weights(&a).unwrap_err().to_string();
    assert!(e.contains("cannot copy"), "{e}");
}
