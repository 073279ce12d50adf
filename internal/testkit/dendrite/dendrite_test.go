package dendrite_test

import (
	"net/http"
	"testing"

	"github.com/nanobot-go/nanobot/internal/testkit/dendrite"
)

func TestStartRegisterWhoami(t *testing.T) {
	s := dendrite.Start(t, dendrite.Options{})
	u := s.Register("bot", "secret-password-1")
	if u.ID != "@bot:"+s.Name || u.DeviceID == "" {
		t.Fatalf("registered %+v", u)
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/_matrix/client/v3/account/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+u.AccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("whoami: HTTP %d\n%s", resp.StatusCode, s.Log())
	}
}
