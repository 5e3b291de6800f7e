-- System accounts keep no Balance row from now on: their balance is the sum of their ledger
-- entries (subgraphs/economy/ledger.ts). Rows written before are dropped; the entries stay.
DELETE FROM "Balance" WHERE account IN ('treasury', 'faucet', 'burn', 'bounty');
