"""Stated threshold rules of ours, used where a paper gives no number (the same words get the same rule)."""

# ---------------------------------------------------------------------------------------------------- rules
# Where the paper gives no number, a threshold is one of these stated rules of ours (the same words get the same rule).
RULES = {
    "match": "ours: 'identical' / 'matches' in loss read as a relative gap under 2% (the paper gives no tolerance)",
    "not-match": "ours: 'not able to match' read as a relative gap above 2% (the converse of the 'matches' rule)",
    "align": "ours: 'almost perfect' / 'strong' / 'very well' alignment read as a mean sensitivity cosine above "
             "0.99 (the paper gives no number; Fig. 2 center left's axis spans 0.80-1.00)",
    "ood": "ours: 'performs equally' on the paper's log-scale OOD panels read as a relative gap under 5% "
           "(0.02 decade) at every sweep point (the paper gives no tolerance)",
    "sign": "paper: the sentence states a direction only ('surpasses', 'better', 'decreases'), so 0",
    "identity": "ours: an exact identity, checked in float64; each identity's tolerance is round-off",
}

RULES["table1-majority"] = (
    "ours: a majority of the correctly classified queries in every layer (chance is 1 in the head's classes); their "
    "script prints this share, but their repository holds no value of it")
RULES["table1-direction"] = (
    "ours: a direction only, so 0; their script prints both shares (Output and Target rows), their repository holds "
    "no value, and no text of the paper is stored here to say how they read it")
