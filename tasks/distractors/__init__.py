"""The distractor engine: counterfactual candidates, candidate filter, adversarial filtering,
AF-Lite, human verification and MCQ export. Generic over instances that have a context, a
question, a gold answer and a group (dialogue) id, so CICERO and CoreQuisite share it."""
