// Package inbox is the one writer of what senders send: every byte a chat
// user, a web page or an API client hands the daemon and that becomes a
// file goes through Save or SaveImage into <workspace>/inbox/. Channels
// (which save documents as they arrive) and the agent (which saves the
// pictures of a turn it keeps) both import it; it imports only
// internal/workspace, the daemon's one access to the workspace.
//
// What it guarantees, whatever the caller passes:
//   - a file is only ever created inside <workspace>/inbox, through an
//     workspace.Files, so neither "..", an absolute name, nor a symlink
//     planted in the workspace leads a write elsewhere, and a read back
//     never follows a link out, waits on a FIFO or reads past its cap;
//   - a file is created new (O_EXCL), never over one that exists, with
//     mode 0600;
//   - a picture's name and extension are the daemon's, chosen from what
//     its bytes are (PNG, JPEG, GIF or WebP), never from what a sender
//     declared.
package inbox
