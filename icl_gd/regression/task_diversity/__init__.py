"""Linear attention pretrained on finitely many tasks (Lu, Letey, Zavatone-Veth, Maiti & Pehlevan, PNAS 2025): its
asymptotic ICL and IDG errors in closed form, the finite-d layer they describe trained exactly, and the simulations
the authors store."""
