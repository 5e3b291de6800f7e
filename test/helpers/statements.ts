// How many statements a call sends: through Prisma (the database's query counter) and through the
// driver (one-statement paths: lib/db/statement.ts), for tests that hold a path to its round trips.
import type { Database } from '../../lib/db/index.ts';

export async function countStatements<T>(db: Database, fn: () => Promise<T>): Promise<{ value: T; prisma: number; driver: number }> {
  const driver = db.driver;
  const query = driver.query.bind(driver);
  let n = 0;
  driver.query = ((...args: Parameters<typeof query>) => (n++, query(...args))) as typeof driver.query;
  const before = db.queryCount();
  try {
    const value = await fn();
    return { value, prisma: db.queryCount() - before, driver: n };
  } finally {
    driver.query = query;
  }
}
