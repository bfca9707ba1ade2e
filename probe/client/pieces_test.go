package client

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"testing"
	"unsafe"
)

// TestImageBodies: each flavor that sends images sends them where its API
// takes them (docs/kinds.md's table), the body written in pieces around
// the shared images being the same JSON as the one encoding/json writes
// of the request's fields: a prompt that needs escapes, the other members,
// and Extra, which replaces the member that carries the images as it
// replaces any other.
func TestImageBodies(t *testing.T) {
	images := []Image{NewImage("image/png", []byte("ABC")), NewImage("image/jpeg", []byte("DEF"))}
	const prompt = "Say \"<&>\"\n\u00e9"
	for _, tc := range []struct {
		name   string
		flavor Flavor
		extra  map[string]any
		want   string
	}{
		{"openai-chat", OpenAIChat, nil,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Say \"<&>\"\n\u00e9"},` +
				`{"type":"image_url","image_url":{"url":"data:image/png;base64,QUJD"}},{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,REVG"}}]}],` +
				`"stream":true,"stream_options":{"include_usage":true},"max_tokens":8}`},
		{"openai-chat, Extra's messages", OpenAIChat, map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x"}}},
			`{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":8}`},
		{"openai-responses", OpenAIResponses, map[string]any{"top_k": 3},
			`{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Say \"<&>\"\n\u00e9"},` +
				`{"type":"input_image","image_url":"data:image/png;base64,QUJD","detail":"auto"},{"type":"input_image","image_url":"data:image/jpeg;base64,REVG","detail":"auto"}]}],` +
				`"stream":true,"store":false,"max_output_tokens":8,"top_k":3}`},
		{"ollama-chat", OllamaChat, nil,
			`{"model":"m","messages":[{"role":"user","content":"Say \"<&>\"\n\u00e9","images":["QUJD","REVG"]}],"stream":true,"options":{"num_predict":8}}`},
		{"ollama-generate", OllamaGenerate, nil,
			`{"model":"m","prompt":"Say \"<&>\"\n\u00e9","images":["QUJD","REVG"],"stream":true,"options":{"num_predict":8}}`},
		{"ollama-generate, Extra's images", OllamaGenerate, map[string]any{"images": []string{"WA=="}},
			`{"model":"m","prompt":"Say \"<&>\"\n\u00e9","images":["WA=="],"stream":true,"options":{"num_predict":8}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := &Target{BaseURL: "http://127.0.0.1:1", Model: "m", Flavor: tc.flavor}
			r := &Request{Prompt: prompt, MaxTokens: 8, Extra: tc.extra, Attach: &Attachments{Images: images}}
			req, err := tc.flavor.NewRequest(context.Background(), target, r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(req.Body)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(got)) != req.ContentLength {
				t.Errorf("Content-Length %d, body %d bytes", req.ContentLength, len(got))
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("sent %s: %v", got, err)
			}
			if err := json.Unmarshal([]byte(tc.want), &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("sent %s\nwant %s", got, tc.want)
			}
			// GetBody, for a request sent again, reads the same bytes.
			again, err := req.GetBody()
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := io.ReadAll(again); !bytes.Equal(b, got) {
				t.Errorf("GetBody read %s\nthe body %s", b, got)
			}
		})
	}
}

// TestImageBodiesShareImages: a request's body holds its images' bytes by
// reference: every image's base64 is one of the body's pieces, at the
// image's own address, and the request holds (Request.Bytes) its prompt and
// framing only, prepared ahead or built at its send.
func TestImageBodiesShareImages(t *testing.T) {
	big := bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 64<<10)
	images := []Image{NewImage("image/png", big), NewImage("image/png", big[1:])}
	for _, flavor := range []Flavor{OpenAIChat, OpenAIResponses, OllamaChat, OllamaGenerate} {
		t.Run(flavor.Name(), func(t *testing.T) {
			target := &Target{BaseURL: "http://127.0.0.1:1", Model: "m", Flavor: flavor}
			r := &Request{Prompt: "Describe.", MaxTokens: 8, Attach: &Attachments{Images: images}}
			Prepare(target, r)
			if _, ok := flavor.(bodyEncoder); ok {
				if r.prepared == nil {
					t.Fatal("not prepared")
				}
				if n := r.Bytes(); n > 1024 {
					t.Errorf("a prepared request holds %d bytes of its own, with %d bytes of shared images", n, images[0].Bytes()+images[1].Bytes())
				}
			}
			req, err := flavor.NewRequest(context.Background(), target, r)
			if err != nil {
				t.Fatal(err)
			}
			p, ok := req.Body.(interface{ Pieces() [][]byte })
			if !ok {
				t.Fatalf("body %T has no pieces", req.Body)
			}
			pieces := p.Pieces()
			// isImage: the piece is an image's data URL or base64, at
			// the image's own address.
			isImage := func(piece []byte) bool {
				for _, im := range images {
					for _, b := range [][]byte{im.DataURL(), im.Base64()} {
						if len(piece) == len(b) && unsafe.SliceData(piece) == unsafe.SliceData(b) {
							return true
						}
					}
				}
				return false
			}
			shared, own := 0, 0
			for _, piece := range pieces {
				if isImage(piece) {
					shared++
				} else {
					own += len(piece)
				}
			}
			if shared != len(images) {
				t.Errorf("%d of the body's pieces are the images' own bytes, want %d: the others were copied", shared, len(images))
			}
			if own > 1024 {
				t.Errorf("%d bytes of the body are not the images'", own)
			}
		})
	}
}

// TestBodyReader: a body read in small reads, written out after a partial
// read, or taken as pieces after one, gives the same bytes, and readers
// of one body do not disturb each other.
func TestBodyReader(t *testing.T) {
	var w bodyWriter
	w.raw("head:")
	w.shared([]byte("SHARED-ONE"))
	w.raw("|")
	w.shared([]byte("SHARED-TWO"))
	w.shared([]byte("THREE"))
	w.raw(":tail")
	b := w.body()
	const want = "head:SHARED-ONE|SHARED-TWOTHREE:tail"
	if b.size != len(want) || b.own != len("head:|:tail") || string(b.bytes()) != want {
		t.Fatalf("body %q, size %d, own %d", b.bytes(), b.size, b.own)
	}
	for _, n := range []int{1, 3, 7, 100} {
		r, other := b.reader(), b.reader()
		var got []byte
		buf := make([]byte, n)
		for {
			k, err := r.Read(buf)
			got = append(got, buf[:k]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				t.Fatalf("reads of %d: no progress", n)
			}
		}
		if string(got) != want {
			t.Errorf("reads of %d: %q", n, got)
		}
		if all, _ := io.ReadAll(other); string(all) != want {
			t.Errorf("a second reader read %q", all)
		}
	}
	for cut := 0; cut <= len(want); cut++ {
		r := b.reader()
		head := make([]byte, cut)
		if _, err := io.ReadFull(r, head); err != nil {
			t.Fatal(err)
		}
		var rest bytes.Buffer
		if _, err := r.WriteTo(&rest); err != nil {
			t.Fatal(err)
		}
		if string(head)+rest.String() != want {
			t.Errorf("cut at %d, then WriteTo: %q + %q", cut, head, rest.String())
		}
		r = b.reader()
		_, _ = io.ReadFull(r, head)
		if got := string(head) + string(bytes.Join(r.Pieces(), nil)); got != want {
			t.Errorf("cut at %d, then Pieces: %q", cut, got)
		}
		if k, err := r.Read(make([]byte, 4)); k != 0 || err != io.EOF {
			t.Errorf("after Pieces, Read gave %d, %v", k, err)
		}
	}
	if string(b.bytes()) != want {
		t.Errorf("the readers changed the body: %q", b.bytes())
	}
}
