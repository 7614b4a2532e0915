"""Work across machines through the user's git remote: claims, leases, the loop-state merge driver."""
