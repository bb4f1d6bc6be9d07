// Package fleet holds the tests and the Example that use two adapters
// together: the AWS SDK's retry loop (awsbudget) spending one retry quota
// kept in Redis for a whole fleet (redisbudget). They live in a module of
// their own so that neither adapter's module requires the other's
// dependencies.
package fleet
