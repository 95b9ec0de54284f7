// Command writeconfig writes the files of config/ generated from the
// built-in policy bundles (policy.ConfigFiles) under the directory given
// (the repository's root; make generate runs it).
package main
