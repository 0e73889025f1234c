"""On-policy evaluation after AMemGym: structured data per persona, a simulated user talking to the
assistant under test, and scoring of what the assistant's memory kept (the README's Gym section)."""
