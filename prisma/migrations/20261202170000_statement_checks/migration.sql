-- The check of a composed statement (lib/db/statement.ts): a false condition raises, so the whole
-- statement (every CTE of every context's part) is undone, and the message names the check.
CREATE FUNCTION cog_require(ok boolean, code text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF ok IS NOT TRUE THEN
    RAISE EXCEPTION '%', code USING ERRCODE = 'P0001';
  END IF;
  RETURN true;
END $$;
