// Package cove is the Go SDK for Cove, the self-hosted sandbox platform for
// AI-generated code (and for any server speaking E2B's protocol).
//
// A client reads COVE_API_URL, COVE_SANDBOX_URL and COVE_API_KEY from the
// environment, falling back to E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY:
//
//	client, err := cove.NewClient()
//	if err != nil { ... }
//	sbx, err := client.Create(ctx, cove.CreateOptions{Timeout: 5 * time.Minute})
//	if err != nil { ... }
//	defer sbx.Kill(context.Background())
//
//	res, err := sbx.Commands.Run(ctx, "python3 -c 'print(6*7)'")
//	var exitErr *cove.CommandExitError
//	switch {
//	case errors.As(err, &exitErr): // the command ran and failed
//	case err != nil: // it could not run
//	}
//	fmt.Print(res.Stdout)
//
//	err = sbx.Files.WriteFile(ctx, "/home/user/data.csv", []byte("a,b\n1,2\n"))
//	r, err := sbx.Files.Read(ctx, "/home/user/data.csv") // an io.ReadCloser
//
// Every call takes a context first. Errors match the sentinels with
// errors.Is (ErrNotFound, ErrUnauthorized, ErrInvalidArgument, ErrTimeout)
// and carry details through errors.As (*APIError, *CommandExitError).
package cove
