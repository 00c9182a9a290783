package raftlock

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
)

// Node is a node of the generic tree, for recipes beyond locks.
type Node struct {
	// Path is the node's full path, e.g. /config/db (for a sequential
	// create, with the counter the cluster appended: queue/item- and
	// queue/item both give /queue/item-0000000042).
	Path string
	Data []byte
	// Version counts the node's updates, from 1 at creation.
	Version        uint64
	CreateRevision uint64
	ModRevision    uint64
	// EphemeralOwner is the session whose end deletes the node; empty
	// for a persistent node.
	EphemeralOwner string
}

type nodeBody struct {
	Path           string  `json:"path"`
	Data           string  `json:"data"`
	Version        uint64  `json:"version"`
	CreateRevision uint64  `json:"create_revision"`
	ModRevision    uint64  `json:"mod_revision"`
	EphemeralOwner *string `json:"ephemeral_owner"`
}

func (b *nodeBody) node() (*Node, error) {
	data, err := base64.StdEncoding.DecodeString(b.Data)
	if err != nil {
		return nil, &Error{Code: CodeProtocol, Message: "node data is not base64", Err: err}
	}
	n := &Node{Path: b.Path, Data: data, Version: b.Version, CreateRevision: b.CreateRevision, ModRevision: b.ModRevision}
	if b.EphemeralOwner != nil {
		n.EphemeralOwner = *b.EphemeralOwner
	}
	return n, nil
}

// NodeOption modifies a node request. Each call accepts only some of
// them: PutNode WithSession, Sequential and IfVersion; DeleteNode
// IfVersion; GetNode and Children Stale. Others are ErrBadRequest.
type NodeOption func(*nodeOptions)

type nodeOptions struct {
	session    string
	sequential bool
	version    *uint64
	stale      bool
}

// WithSession makes a created node ephemeral: owned by the session and
// deleted when it ends.
func WithSession(sessionID string) NodeOption {
	return func(o *nodeOptions) { o.session = sessionID }
}

// Sequential appends a per-parent, increasing, zero-padded counter to
// the path's last component (lock-0000000042) and always creates.
func Sequential() NodeOption {
	return func(o *nodeOptions) { o.sequential = true }
}

// IfVersion makes a write conditional on the node's current version;
// 0 means "must not exist". ErrVersionMismatch otherwise.
func IfVersion(version uint64) NodeOption {
	return func(o *nodeOptions) { o.version = &version }
}

// Stale reads from the answering member's state without a read index:
// faster, possibly behind.
func Stale() NodeOption {
	return func(o *nodeOptions) { o.stale = true }
}

func nodeOpts(call string, opts []NodeOption, put, del, get bool) (nodeOptions, error) {
	var o nodeOptions
	for _, f := range opts {
		f(&o)
	}
	if (!put && (o.session != "" || o.sequential)) || (!put && !del && o.version != nil) || (!get && o.stale) {
		return o, apiError(CodeBadRequest, "an option given to %s does not apply to it", call)
	}
	return o, nil
}

// apiNodePath is the API path of tree path p (/v1/nodes/a/b for /a/b),
// percent-encoded: tree paths take ZooKeeper's characters, and `?`, `#`,
// `%` or a space must not cut the URL.
func apiNodePath(p string) string {
	if p == "/" {
		return "/v1/nodes"
	}
	return "/v1/nodes" + (&url.URL{Path: p}).EscapedPath()
}

// GetNode reads the node at path (e.g. /config/db).
func (c *Client) GetNode(ctx context.Context, path string, opts ...NodeOption) (*Node, error) {
	o, err := nodeOpts("GetNode", opts, false, false, true)
	if err != nil {
		return nil, err
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	p := apiNodePath(path)
	if o.stale {
		p += "?consistency=stale"
	}
	_, out, err := c.do(ctx, call{method: http.MethodGet, path: p})
	if err != nil {
		return nil, err
	}
	var b nodeBody
	if err := decode(out, &b); err != nil {
		return nil, err
	}
	return b.node()
}

// Children lists the names of the node's children (not full paths),
// sorted. "/" is the root.
func (c *Client) Children(ctx context.Context, path string, opts ...NodeOption) ([]string, error) {
	o, err := nodeOpts("Children", opts, false, false, true)
	if err != nil {
		return nil, err
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	p := apiNodePath(path) + "?children=true"
	if o.stale {
		p += "&consistency=stale"
	}
	_, out, err := c.do(ctx, call{method: http.MethodGet, path: p})
	if err != nil {
		return nil, err
	}
	var b struct {
		Children []string `json:"children"`
	}
	if err := decode(out, &b); err != nil {
		return nil, err
	}
	return b.Children, nil
}

// PutNode creates or updates the node at path with data; missing parents
// are created as empty persistent nodes. created tells which. Paths under
// /locks and /elections belong to the recipes and are refused.
func (c *Client) PutNode(ctx context.Context, path string, data []byte, opts ...NodeOption) (node *Node, created bool, err error) {
	o, err := nodeOpts("PutNode", opts, true, false, false)
	if err != nil {
		return nil, false, err
	}
	if err := checkPath(path); err != nil {
		return nil, false, err
	}
	body := struct {
		Data            string  `json:"data"`
		SessionID       string  `json:"session_id,omitempty"`
		Sequential      bool    `json:"sequential,omitempty"`
		ExpectedVersion *uint64 `json:"expected_version,omitempty"`
	}{base64.StdEncoding.EncodeToString(data), o.session, o.sequential, o.version}
	status, out, err := c.do(ctx, call{method: http.MethodPut, path: apiNodePath(path), body: body, noResend: true})
	if err != nil {
		return nil, false, err
	}
	var b nodeBody
	if err := decode(out, &b); err != nil {
		return nil, false, err
	}
	node, err = b.node()
	return node, status == http.StatusCreated, err
}

// DeleteNode deletes the node at path; ErrNotEmpty while it has
// children.
func (c *Client) DeleteNode(ctx context.Context, path string, opts ...NodeOption) error {
	o, err := nodeOpts("DeleteNode", opts, false, true, false)
	if err != nil {
		return err
	}
	if err := checkPath(path); err != nil {
		return err
	}
	p := apiNodePath(path)
	if o.version != nil {
		p += "?" + url.Values{"expected_version": {strconv.FormatUint(*o.version, 10)}}.Encode()
	}
	_, _, err = c.do(ctx, call{method: http.MethodDelete, path: p, noResend: true})
	return err
}
